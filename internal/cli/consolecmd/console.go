package consolecmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/pricing"
)

// Name is the console binary's name.
const Name = "engagement-console"

// consoleOptions is one engagement-console.
type consoleOptions struct {
	cli.CmdIO
	cli.DBOptions
	databaseURL       string
	replicaURL        string
	listen            string
	port              string
	htpasswd          string
	trustedUserHeader string
	trustedProxies    []string
	operators         []string
	tlsCert, tlsKey   string
	readTimeout       time.Duration
	statementTimeout  time.Duration
	maxAge            time.Duration
	csrfKey           string
	whatsAppSecret    string
	whatsAppToken     string
	pricesFile        string
	prices            *pricing.Prices
	asOf              cli.AsOfValue
	logs              cli.LogFlags

	auth console.Auth
	tls  *tls.Config
	log  zerolog.Logger
}

// DefaultConsoleReadTimeout is how long a client may take to send a whole
// request to the console, headers and body.
const DefaultConsoleReadTimeout = 30 * time.Second

// NewCommand returns the engagement-console command.
func NewCommand() *cobra.Command {
	o := &consoleOptions{}
	o.DBURL = &o.databaseURL
	cmd := &cobra.Command{
		Use:   Name,
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
reverse proxy that authenticates (oauth2-proxy's X-Forwarded-Email),
believed only from the addresses of --trusted-proxy (loopback when the
console listens on loopback; without either it refuses to start). Failed
logins are limited per client and per user (429 with Retry-After), those
of a browser that signed in as the user before by its own (a device
cookie), and logged one line each. Users named in --operators may act; everyone else
only looks. With neither, the console is open to anyone who reaches it, so
it refuses to start (exit 2) unless --listen is a loopback address.
--tls-cert and --tls-key serve HTTPS. See docs/console.md.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, nil),
	}
	o.register(cmd.Flags())
	return cmd
}

// register binds the console's flags to o, each with its environment
// variable where it has one; the secrets among them are kept out of help
// and logs.
func (o *consoleOptions) register(fs *pflag.FlagSet) {
	cli.RegisterDatabaseURL(fs, &o.databaseURL)
	fs.StringVar(&o.replicaURL, "replica-url", "", "PostgreSQL URL of a read replica of the database (a hot standby, e.g. Supabase's read replica): the overview, queue, verify and forecast pages read from it; actions and the audit stay on --database-url")
	cliflag.BindEnv(fs, "replica-url", "ENGAGEMENT_CONSOLE_REPLICA_URL")
	cliflag.MarkSecret(fs, "replica-url")
	fs.StringVar(&o.listen, "listen", "", "address to listen on, host:port (default 127.0.0.1:8080, or :$PORT when PORT is set)")
	cliflag.BindEnv(fs, "listen", "ENGAGEMENT_CONSOLE_LISTEN")
	fs.StringVar(&o.port, "port", "", "the port to listen on, all interfaces, when --listen is not given (a platform's PORT)")
	cliflag.BindEnv(fs, "port", "PORT")
	_ = fs.MarkHidden("port")
	fs.StringVar(&o.htpasswd, "htpasswd", "", "htpasswd file of bcrypt entries for HTTP Basic auth; the variable may hold the entries themselves")
	cliflag.BindEnv(fs, "htpasswd", "ENGAGEMENT_CONSOLE_HTPASSWD")
	cliflag.MarkSecret(fs, "htpasswd")
	fs.StringVar(&o.trustedUserHeader, "trusted-user-header", "", "header an authenticating reverse proxy sets to the user, e.g. X-Forwarded-Email")
	cliflag.BindEnv(fs, "trusted-user-header", "ENGAGEMENT_CONSOLE_TRUSTED_USER_HEADER")
	fs.StringSliceVar(&o.trustedProxies, "trusted-proxy", nil, "addresses (CIDRs or IPs, comma-separated or repeated) of the reverse proxies in front of the console: --trusted-user-header is believed only from them (default: loopback, when listening on loopback), and X-Forwarded-For only from them")
	cliflag.BindEnv(fs, "trusted-proxy", "ENGAGEMENT_CONSOLE_TRUSTED_PROXY")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain) file; needs --tls-key")
	cliflag.BindEnv(fs, "tls-cert", "ENGAGEMENT_CONSOLE_TLS_CERT")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the PEM private key file of --tls-cert")
	cliflag.BindEnv(fs, "tls-key", "ENGAGEMENT_CONSOLE_TLS_KEY")
	fs.DurationVar(&o.readTimeout, "read-timeout", DefaultConsoleReadTimeout, "how long a client may take to send a whole request, headers and body, before the connection is closed")
	fs.StringSliceVar(&o.operators, "operators", nil, "users who may act (requeue, cancel), comma-separated; everyone else only looks")
	cliflag.BindEnv(fs, "operators", "ENGAGEMENT_CONSOLE_OPERATORS")
	fs.DurationVar(&o.statementTimeout, "statement-timeout", console.DefaultStatementTimeout, "how long any one statement of a page may run")
	fs.DurationVar(&o.maxAge, "max-age", console.DefaultMaxAge, "how old the overview, queue, verify and forecast pages may get: they are read again in the background while anyone looks at them and after every action; an older one is served at once, marked as refreshing")
	fs.StringVar(&o.csrfKey, "csrf-key", "", "the key that signs the forms' tokens (and, with each user's htpasswd entry, the device cookies), the same on every replica behind one address (default: a random key per process; forms rendered before a restart are then refused)")
	cliflag.BindEnv(fs, "csrf-key", "ENGAGEMENT_CONSOLE_CSRF_KEY")
	cliflag.MarkSecret(fs, "csrf-key")
	fs.StringVar(&o.whatsAppSecret, "whatsapp-app-secret", "", "the Meta app's secret: serve Meta's webhook at "+console.WhatsAppWebhookPath+" (outside the console's authentication; every POST must be signed with it) and apply WhatsApp's statuses as receipts")
	cliflag.BindEnv(fs, "whatsapp-app-secret", "WHATSAPP_APP_SECRET")
	cliflag.MarkSecret(fs, "whatsapp-app-secret")
	fs.StringVar(&o.whatsAppToken, "whatsapp-verify-token", "", "the verify token Meta's webhook subscription sends (with --whatsapp-app-secret)")
	cliflag.BindEnv(fs, "whatsapp-verify-token", "WHATSAPP_VERIFY_TOKEN")
	cliflag.MarkSecret(fs, "whatsapp-verify-token")
	fs.StringVar(&o.pricesFile, "prices-file", "", "Meta's prices per country and category, JSON, for what the messages cost (docs/console.md, What it costs); default: the shipped, dated prices for Brazil")
	cliflag.BindEnv(fs, "prices-file", "ENGAGEMENT_PRICES_FILE")
	o.asOf.Name = "--as-of"
	fs.Var(&o.asOf, "as-of", "the instant the pages treat as now, RFC3339 (default: the database clock)")
	o.logs.Register(fs)
}

// Validate checks every flag before the server starts.
func (o *consoleOptions) Validate() error {
	if err := cli.RequireDatabaseURL(o.databaseURL); err != nil {
		return err
	}
	if err := o.asOf.Check(); err != nil {
		return err
	}
	if o.replicaURL != "" {
		if _, err := pgx.ParseConfig(o.replicaURL); err != nil {
			return cli.UsageError(fmt.Errorf("invalid --replica-url: %w", err))
		}
	}
	if o.statementTimeout <= 0 {
		return cli.Usagef("--statement-timeout must be positive, got %s", o.statementTimeout)
	}
	if o.csrfKey != "" && len(o.csrfKey) < 32 {
		return cli.Usagef("--csrf-key must be at least 32 characters (e.g. openssl rand -hex 32)")
	}
	if o.pricesFile != "" {
		p, err := pricing.Load(o.pricesFile)
		if err != nil {
			return cli.UsageError(fmt.Errorf("--prices-file: %w", err))
		}
		o.prices = p
	}
	if (o.whatsAppSecret == "") != (o.whatsAppToken == "") {
		return cli.Usagef("--whatsapp-app-secret and --whatsapp-verify-token go together: Meta's webhook needs both")
	}
	if o.maxAge < time.Second {
		return cli.Usagef("--max-age must be at least 1s, got %s", o.maxAge)
	}
	if o.readTimeout <= 0 {
		return cli.Usagef("--read-timeout must be positive, got %s", o.readTimeout)
	}
	var err error
	if o.log, err = o.logs.Logger(o.Stderr, Name); err != nil {
		return err
	}
	host, err := o.listenHost()
	if err != nil {
		return err
	}
	return o.validateAccess(host)
}

// listenHost settles the address to listen on (--listen, else --port on
// every interface, else loopback's 127.0.0.1:8080) and returns its host,
// which decides whether the console may be served without authentication.
func (o *consoleOptions) listenHost() (string, error) {
	switch {
	case o.listen != "":
	case o.port != "":
		o.listen = ":" + o.port
	default:
		o.listen = "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(o.listen)
	if err != nil || port == "" {
		return "", cli.Usagef("--listen must be host:port, got %q", o.listen)
	}
	return host, nil
}

// validateAccess reads who may reach the console listening on host, and
// how: its users (--htpasswd, or a trusted proxy's header), its TLS
// certificate and its operators. It refuses a console open to anyone off
// loopback, and operators named where no one is authenticated.
func (o *consoleOptions) validateAccess(host string) (err error) {
	if o.htpasswd != "" {
		if o.auth.Users, err = readHtpasswd(o.htpasswd); err != nil {
			return cli.UsageError(err)
		}
	}
	o.auth.TrustedUserHeader = strings.TrimSpace(o.trustedUserHeader)
	if o.auth.TrustedProxies, err = parseTrustedProxies(o.trustedProxies); err != nil {
		return err
	}
	if o.auth.TrustedUserHeader != "" && len(o.auth.TrustedProxies) == 0 {
		if !loopback(host) {
			return cli.Usagef("refusing to believe --trusted-user-header %s from anyone who reaches %s: give --trusted-proxy with the proxy's addresses (CIDRs), or listen on loopback",
				o.auth.TrustedUserHeader, o.listen)
		}
		o.auth.TrustedProxies = console.LoopbackPrefixes
	}
	if o.tls, err = loadTLS(o.tlsCert, o.tlsKey); err != nil {
		return err
	}
	for _, op := range o.operators {
		if op = strings.TrimSpace(op); op != "" {
			o.auth.Operators = append(o.auth.Operators, op)
		}
	}
	if o.auth.Open() && !loopback(host) {
		return cli.Usagef("refusing to serve the console without authentication on %s: give --htpasswd or --trusted-user-header, or listen on loopback (127.0.0.1:8080)", o.listen)
	}
	if o.auth.Open() && len(o.auth.Operators) > 0 {
		return cli.Usagef("--operators names users, but no authentication is set: give --htpasswd or --trusted-user-header")
	}
	return nil
}

// parseTrustedProxies parses --trusted-proxy: CIDRs, or addresses (one
// host each).
func parseTrustedProxies(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		if p, err := netip.ParsePrefix(v); err == nil {
			out = append(out, p.Masked())
			continue
		}
		addr, err := netip.ParseAddr(v)
		if err != nil {
			return nil, cli.Usagef("--trusted-proxy %q is neither a CIDR (10.0.0.0/8) nor an address", v)
		}
		addr = addr.Unmap()
		out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
	}
	return out, nil
}

// loadTLS reads --tls-cert and --tls-key: both or neither.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "":
		return nil, cli.Usagef("--tls-key needs --tls-cert")
	case keyFile == "":
		return nil, cli.Usagef("--tls-cert needs --tls-key")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, cli.Usagef("--tls-cert %s and --tls-key %s: %v", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
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

var _ cli.Wrapper = (*consoleOptions)(nil)

// Around runs the console with its logger in the run's context: the pool
// logs server warnings with it.
func (o *consoleOptions) Around(ctx context.Context, run func(context.Context) error) error {
	return run(o.log.WithContext(ctx))
}

// Run serves until ctx ends, then shuts down, letting requests in flight
// finish (a few seconds at most).
func (o *consoleOptions) Run(ctx context.Context) error {
	cfg := console.Config{Pool: o.Pool, Auth: o.auth, StatementTimeout: o.statementTimeout, MaxAge: o.maxAge, CSRFKey: []byte(o.csrfKey), Logger: o.log,
		WhatsApp: console.WhatsAppWebhook{AppSecret: o.whatsAppSecret, VerifyToken: o.whatsAppToken}, Prices: o.prices}
	if at := o.asOf.Time(); !at.IsZero() {
		cfg.AsOf = func() time.Time { return at }
	}
	if o.replicaURL != "" {
		replica, err := o.openReplica(ctx)
		if err != nil {
			return err
		}
		defer replica.Close()
		cfg.Replica = replica
	}
	handler, err := console.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return cli.UsageError(fmt.Errorf("--listen %s: %w", o.listen, err))
	}
	// A client has --read-timeout to send a whole request (a slow body
	// cannot hold a connection), 10 s of it for the headers.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: min(10*time.Second, o.readTimeout), ReadTimeout: o.readTimeout,
		IdleTimeout: 2 * time.Minute, TLSConfig: o.tls, ErrorLog: httpErrorLog(o.log)}
	o.announce(ln)
	done := o.serve(srv, ln)
	// The snapshots' refresh ends with the run: Run returns once it has
	// (it logs what it was doing when stopped, to the run's stderr, which
	// is the caller's again once Run returns).
	refreshCtx, stopRefresh := context.WithCancel(ctx)
	var refreshing sync.WaitGroup
	refreshing.Go(func() { handler.Refresh(refreshCtx) })
	defer func() {
		stopRefresh()
		refreshing.Wait()
	}()
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

// serve serves on ln in the background, over TLS when the console has a
// certificate; the channel gets what serving returned.
func (o *consoleOptions) serve(srv *http.Server, ln net.Listener) <-chan error {
	done := make(chan error, 1)
	go func() {
		if o.tls != nil {
			done <- srv.ServeTLS(ln, "", "")
			return
		}
		done <- srv.Serve(ln)
	}()
	return done
}

// announce logs where the console listens and how it authenticates, warns
// when Basic auth crosses the network in the clear, and tells the person
// who started it which address to open.
func (o *consoleOptions) announce(ln net.Listener) {
	mode := "htpasswd"
	switch {
	case o.auth.Open():
		mode = "none (loopback only)"
	case o.auth.TrustedUserHeader != "" && len(o.auth.Users) > 0:
		mode = "trusted header or htpasswd"
	case o.auth.TrustedUserHeader != "":
		mode = "trusted header"
	}
	scheme := "http"
	if o.tls != nil {
		scheme = "https"
	}
	o.log.Info().Str("listen", ln.Addr().String()).Str("auth", mode).Str("scheme", scheme).Int("operators", len(o.auth.Operators)).
		Bool("replica", o.replicaURL != "").Bool("whatsapp_webhook", o.whatsAppSecret != "").Msg("console listening")
	if host, _, _ := net.SplitHostPort(o.listen); len(o.auth.Users) > 0 && o.tls == nil && !loopback(host) {
		o.log.Warn().Str("listen", ln.Addr().String()).
			Msg("Basic auth over plain HTTP off loopback: passwords cross the network readable unless a TLS proxy is in front; give --tls-cert and --tls-key")
	}
	fmt.Fprintf(o.Stderr, "engagement-console: open %s://%s/\n", scheme, displayAddr(ln.Addr()))
}

// httpErrorLog sends what net/http logs to the console's logger, one line
// each: a TLS handshake that failed (a scanner, a plain HTTP request on
// the HTTPS port) at debug, anything else (a panic in a handler) as a
// warning.
func httpErrorLog(l zerolog.Logger) *log.Logger {
	return log.New(httpLogWriter{l}, "", 0)
}

type httpLogWriter struct{ l zerolog.Logger }

func (w httpLogWriter) Write(p []byte) (int, error) {
	msg := cli.OneLine(string(p))
	e := w.l.Warn()
	if strings.Contains(msg, "TLS handshake error") {
		e = w.l.Debug()
	}
	e.Str("library", "net/http").Msg(msg)
	return len(p), nil
}

// openReplica opens --replica-url as the database is opened (the same
// constructor and settings, its schema checked), and says in the log when
// it is not a standby: the pages then read from a primary, which works,
// but takes none of their load off the one the actions use when it is
// that one.
func (o *consoleOptions) openReplica(ctx context.Context) (*pgxpool.Pool, error) {
	replica, err := cli.OpenChecked(ctx, o.replicaURL, Name)
	if err != nil {
		return nil, fmt.Errorf("--replica-url: %w", err)
	}
	recovery, err := inRecoveryQuery.One(ctx, replica, sqlfile.None{})
	if err != nil {
		replica.Close()
		return nil, fmt.Errorf("--replica-url: %w", err)
	}
	if !recovery.Standby {
		o.log.Warn().Msg("the --replica-url server is not a standby (not in recovery): the snapshot pages read from a primary")
	}
	return replica, nil
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
