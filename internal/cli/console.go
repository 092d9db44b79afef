package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/console"
)

// ConsoleCommand is the console binary's name.
const ConsoleCommand = "engagement-console"

// consoleOptions is one engagement-console.
type consoleOptions struct {
	cmdIO
	dbOptions
	databaseURL       string
	listen            string
	port              string
	htpasswd          string
	trustedUserHeader string
	operators         []string
	statementTimeout  time.Duration
	maxAge            time.Duration
	csrfKey           string
	asOf              asOfValue
	logs              logFlags

	auth console.Auth
	log  zerolog.Logger
}

// NewConsoleCommand returns the engagement-console command.
func NewConsoleCommand() *cobra.Command {
	o := &consoleOptions{}
	o.dbURL = &o.databaseURL
	cmd := &cobra.Command{
		Use:   ConsoleCommand,
		Short: "Serve the operators' web console: the funnel, the queue, runs, verify, users, forecast, actions",
		Long: `Serves the operators' web console over the scheduler's database until it is
stopped (SIGTERM or Ctrl-C): the engagement funnel, the queue's health, the
job runs, the invariants (engagementctl verify), a user's timeline, the next
7 days' forecast, and two actions, requeue and cancel, each previewed,
confirmed and written to an audit table. Every page is also JSON
(Accept: application/json). GET /healthz answers 200 while the database
answers, without authentication.

Authentication is built in: --htpasswd (bcrypt entries, as htpasswd -nB
makes them) for HTTP Basic auth, and/or --trusted-user-header for a
reverse proxy that authenticates (oauth2-proxy's X-Forwarded-Email; only
safe when nothing but the proxy reaches the console). Users named in
--operators may act; everyone else only looks. With neither, the console
is open to anyone who reaches it, so it refuses to start (exit 2) unless
--listen is a loopback address. See docs/console.md.`,
		Args: cobra.NoArgs,
		RunE: runOptions(o, nil),
	}
	fs := cmd.Flags()
	registerDatabaseURL(fs, &o.databaseURL)
	fs.StringVar(&o.listen, "listen", "", "address to listen on, host:port (default 127.0.0.1:8080, or :$PORT when PORT is set)")
	bindEnv(fs, "listen", "ENGAGEMENT_CONSOLE_LISTEN")
	fs.StringVar(&o.port, "port", "", "the port to listen on, all interfaces, when --listen is not given (a platform's PORT)")
	bindEnv(fs, "port", "PORT")
	_ = fs.MarkHidden("port")
	fs.StringVar(&o.htpasswd, "htpasswd", "", "htpasswd file of bcrypt entries for HTTP Basic auth; the variable may hold the entries themselves")
	bindEnv(fs, "htpasswd", "ENGAGEMENT_CONSOLE_HTPASSWD")
	markSecret(fs, "htpasswd")
	fs.StringVar(&o.trustedUserHeader, "trusted-user-header", "", "header an authenticating reverse proxy sets to the user, e.g. X-Forwarded-Email")
	bindEnv(fs, "trusted-user-header", "ENGAGEMENT_CONSOLE_TRUSTED_USER_HEADER")
	fs.StringSliceVar(&o.operators, "operators", nil, "users who may act (requeue, cancel), comma-separated; everyone else only looks")
	bindEnv(fs, "operators", "ENGAGEMENT_CONSOLE_OPERATORS")
	fs.DurationVar(&o.statementTimeout, "statement-timeout", console.DefaultStatementTimeout, "how long any one statement of a page may run")
	fs.DurationVar(&o.maxAge, "max-age", console.DefaultMaxAge, "how old the overview, queue, verify and forecast pages may be: they are recomputed in the background, and after every action")
	fs.StringVar(&o.csrfKey, "csrf-key", "", "the key that signs the forms' tokens, the same on every replica behind one address (default: a random key per process; forms rendered before a restart are then refused)")
	bindEnv(fs, "csrf-key", "ENGAGEMENT_CONSOLE_CSRF_KEY")
	markSecret(fs, "csrf-key")
	o.asOf.name = "--as-of"
	fs.Var(&o.asOf, "as-of", "the instant the pages treat as now, RFC3339 (default: the database clock)")
	o.logs.register(fs)
	return cmd
}

// Validate checks every flag before the server starts.
func (o *consoleOptions) Validate() error {
	if err := requireDatabaseURL(o.databaseURL); err != nil {
		return err
	}
	if err := o.asOf.Check(); err != nil {
		return err
	}
	if o.statementTimeout <= 0 {
		return usagef("--statement-timeout must be positive, got %s", o.statementTimeout)
	}
	if o.csrfKey != "" && len(o.csrfKey) < 32 {
		return usagef("--csrf-key must be at least 32 characters (e.g. openssl rand -hex 32)")
	}
	if o.maxAge < time.Second {
		return usagef("--max-age must be at least 1s, got %s", o.maxAge)
	}
	var err error
	if o.log, err = o.logs.logger(o.stderr, ConsoleCommand); err != nil {
		return err
	}
	switch {
	case o.listen != "":
	case o.port != "":
		o.listen = ":" + o.port
	default:
		o.listen = "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(o.listen)
	if err != nil || port == "" {
		return usagef("--listen must be host:port, got %q", o.listen)
	}
	if o.htpasswd != "" {
		if o.auth.Users, err = readHtpasswd(o.htpasswd); err != nil {
			return usageError(err)
		}
	}
	o.auth.TrustedUserHeader = strings.TrimSpace(o.trustedUserHeader)
	for _, op := range o.operators {
		if op = strings.TrimSpace(op); op != "" {
			o.auth.Operators = append(o.auth.Operators, op)
		}
	}
	if o.auth.Open() && !loopback(host) {
		return usagef("refusing to serve the console without authentication on %s: give --htpasswd or --trusted-user-header, or listen on loopback (127.0.0.1:8080)", o.listen)
	}
	if o.auth.Open() && len(o.auth.Operators) > 0 {
		return usagef("--operators names users, but no authentication is set: give --htpasswd or --trusted-user-header")
	}
	return nil
}

// readHtpasswd reads the htpasswd entries from the file value names or,
// when no such file exists and value holds user:hash entries (a platform
// that gives variables but no files), from value itself: one entry per
// line or separated by spaces.
func readHtpasswd(value string) (map[string][]byte, error) {
	f, err := os.Open(value)
	if errors.Is(err, os.ErrNotExist) && strings.Contains(value, ":") {
		users, err := console.ParseHtpasswd(strings.NewReader(strings.Join(strings.Fields(value), "\n")))
		if err != nil {
			return nil, fmt.Errorf("--htpasswd (entries given inline): %w", err)
		}
		return users, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--htpasswd: %w", err)
	}
	defer f.Close()
	users, err := console.ParseHtpasswd(f)
	if err != nil {
		return nil, fmt.Errorf("--htpasswd %s: %w", value, err)
	}
	return users, nil
}

// loopback reports whether host names only the loopback interface: an
// empty host (all interfaces) is not.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// around runs the console with its logger in the run's context: the pool
// logs server warnings with it.
func (o *consoleOptions) around(ctx context.Context, run func(context.Context) error) error {
	return run(o.log.WithContext(ctx))
}

// Run serves until ctx ends, then shuts down, letting requests in flight
// finish (a few seconds at most).
func (o *consoleOptions) Run(ctx context.Context) error {
	cfg := console.Config{Pool: o.pool, Auth: o.auth, StatementTimeout: o.statementTimeout, MaxAge: o.maxAge, CSRFKey: []byte(o.csrfKey), Logger: o.log}
	if at := o.asOf.Time(); !at.IsZero() {
		cfg.AsOf = func() time.Time { return at }
	}
	handler, err := console.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return usageError(fmt.Errorf("--listen %s: %w", o.listen, err))
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	mode := "htpasswd"
	switch {
	case o.auth.Open():
		mode = "none (loopback only)"
	case o.auth.TrustedUserHeader != "" && len(o.auth.Users) > 0:
		mode = "trusted header or htpasswd"
	case o.auth.TrustedUserHeader != "":
		mode = "trusted header"
	}
	o.log.Info().Str("listen", ln.Addr().String()).Str("auth", mode).Int("operators", len(o.auth.Operators)).
		Msg("console listening")
	fmt.Fprintf(o.stderr, "engagement-console: open http://%s/\n", displayAddr(ln.Addr()))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	refreshCtx, stopRefresh := context.WithCancel(ctx)
	defer stopRefresh()
	go handler.Refresh(refreshCtx)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	o.log.Info().Msg("console stopped")
	return nil
}

// displayAddr is the address to open in a browser: all interfaces shows as
// localhost.
func displayAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || tcp.IP.IsUnspecified() {
		if ok {
			return fmt.Sprintf("localhost:%d", tcp.Port)
		}
		return a.String()
	}
	return a.String()
}
