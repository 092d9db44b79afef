// Package postgres opens the connection pool every engagement binary uses and
// translates connection errors into one safe line.
//
// The pool works the same connected directly and through a transaction
// pooler (PgBouncer or Supabase's Supavisor in transaction mode) with the
// URL unchanged: the only startup parameter it adds is application_name,
// statements run as unnamed prepared statements (pgx's exec mode, so
// nothing is prepared by name on a server connection another client may
// get next), the statement timeout is applied per statement by the client
// (see timeout.go), and no session state is set. Code using the pool must
// keep it that way: no session advisory locks, no plain SET (SET LOCAL or
// set_config(…, true) inside a transaction is fine), no temporary tables
// across transactions.
package postgres

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Defaults applied when the database URL does not set them.
const (
	DefaultConnectTimeout   = 10 * time.Second
	DefaultStatementTimeout = 5 * time.Minute
	// MaxConns is a pool's size, and the most a URL's pool_max_conns may ask for.
	MaxConns = 8
)

// Open connects a pool to databaseURL, names the connections after app (so
// they show in pg_stat_activity), bounds connects and statements, and pings.
// The pool works through transaction poolers; see the package comment.
// Errors never contain the password.
func Open(ctx context.Context, databaseURL, app string) (*pgxpool.Pool, error) {
	config, err := PoolConfig(ctx, databaseURL, app)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, Redact(fmt.Errorf("connect to database: %w", err), databaseURL)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, Redact(fmt.Errorf("connect to database: %w%s", err, tlsHint(err)), databaseURL)
	}
	return pool, nil
}

// PoolConfig is the configuration Open connects with: every setting a
// binary's pool has (exec mode, the client-side statement timeout, the
// pool's size, the warning log). The test kit builds its pools from it, so
// that a test runs the statements as the binaries send them; a pool from
// pgxpool.New's defaults once hid a 500 on every console action (a []byte
// argument is bytea text in exec mode, not JSON).
func PoolConfig(ctx context.Context, databaseURL, app string) (*pgxpool.Config, error) {
	config, err := parseConfig(databaseURL, app, ConnectTimeout(ctx))
	if err != nil {
		return nil, err
	}
	config.ConnConfig.OnNotice = logWarnings(*zerolog.Ctx(ctx))
	return config, nil
}

// WarningMessage is the message of the log line a server WARNING becomes.
// The test kit fails a test whose command wrote one (cmdtest).
const WarningMessage = "postgres warning"

// logWarnings returns an OnNotice handler that logs each WARNING the server
// sends (a SET LOCAL outside a transaction, say: a setting that silently
// did not apply) as one line at warn level, with its SQLSTATE. NOTICEs
// (migrations' "already exists, skipping") and below are left out.
func logWarnings(log zerolog.Logger) pgconn.NoticeHandler {
	return func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if n.Severity != "WARNING" {
			return
		}
		log.Warn().Str("sqlstate", n.Code).Str("notice", oneLineText(n.Message)).Msg(WarningMessage)
	}
}

// oneLineText folds s onto one line.
func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }

// tlsHint names the fix when the server's certificate is signed by a CA
// the system does not trust: a managed database's own root CA (Supabase,
// RDS) must be named by sslrootcert.
func tlsHint(err error) string {
	var unknown x509.UnknownAuthorityError
	if errors.As(err, &unknown) {
		return " (the server's certificate is signed by a CA this system does not trust: put your provider's root CA in a file and add sslrootcert=<its path> to the URL; docs/deploy.md, \"TLS with your provider's CA\")"
	}
	return ""
}

// parseConfig parses databaseURL into a pool configuration with the
// defaults Open applies: application_name app, connectTimeout unless the
// URL sets connect_timeout, a statement timeout (DefaultStatementTimeout,
// or the URL's statement_timeout, applied by the client: see
// WithStatementTimeout), pgx's exec mode (unless the URL sets
// default_query_exec_mode) and MaxConns connections (fewer if the URL's
// pool_max_conns asks for fewer).
func parseConfig(databaseURL, app string, connectTimeout time.Duration) (*pgxpool.Config, error) {
	config, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, Redact(fmt.Errorf("invalid database URL: %w", err), databaseURL)
	}
	cc := config.ConnConfig
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = connectTimeout
	}
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = app
	}
	limiter := &statementLimiter{timeout: DefaultStatementTimeout}
	if v, ok := cc.RuntimeParams["statement_timeout"]; ok {
		// Not a startup parameter: transaction poolers reject it.
		delete(cc.RuntimeParams, "statement_timeout")
		if limiter.timeout, err = parseTimeout(v); err != nil {
			return nil, Redact(fmt.Errorf("invalid database URL: %w", err), databaseURL)
		}
	}
	cc.Tracer = limiter
	if !strings.Contains(databaseURL, "default_query_exec_mode") {
		// Unnamed statements, parameters typed from their Go values: one
		// round trip, nothing left on the server connection.
		cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	// pgxpool sizes a pool by the client's CPUs (4 on a 2-core pod), but
	// what the connections wait on is the server: queue-process's workers
	// queued for 4 connections and delivered at half the rate they do with
	// 8 (docs/BENCHMARKS.md). A batch job needs no more than that; the
	// rest of the server's slots are the bot's.
	if !strings.Contains(databaseURL, "pool_max_conns") || config.MaxConns > MaxConns {
		config.MaxConns = MaxConns
	}
	return config, nil
}

type connectTimeoutKey struct{}

// WithConnectTimeout returns a copy of ctx under which a database URL that
// sets no connect_timeout gives up connecting after d instead of
// DefaultConnectTimeout: Open, RequireSession and the migrations read it
// with ConnectTimeout. Tests use it to reach a silent server's timeout
// without waiting out the default; d <= 0 leaves the default.
func WithConnectTimeout(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, connectTimeoutKey{}, d)
}

// ConnectTimeout is the connect timeout for a URL without connect_timeout
// under ctx: the one WithConnectTimeout set, else DefaultConnectTimeout.
func ConnectTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(connectTimeoutKey{}).(time.Duration); ok {
		return d
	}
	return DefaultConnectTimeout
}

// Redact returns err as a single line with databaseURL's password, if any,
// masked wherever it travels as a credential: in a URL's user info
// (user:password@, raw or escaped), after its user name (user:password), or
// as password=… of a keyword/value string. pgx leaves passwords out of its
// own messages (its parse errors print the URL with xxxxx for the
// password); this catches one a caller or a server echoed. A bare
// substring is never replaced: with the password "a", replacing every "a"
// made "invalid database URL" unreadable.
func Redact(err error, databaseURL string) error { return Scrub(err, databaseURL) }

// MinSecretLength is the shortest secret Scrub replaces wherever it
// appears: masking every "a" of a one-letter token would garble the
// message and hide nothing.
const MinSecretLength = 8

// Scrub returns err as a single line with every secret masked: a URL's or
// connection string's password where it travels as a credential (as
// Redact), and any other secret (a token) wherever it appears, when it is
// at least MinSecretLength long. The result still unwraps to err.
func Scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := strings.Join(strings.Fields(err.Error()), " ")
	for _, secret := range secrets {
		user, pws := credentials(secret)
		for _, pw := range pws {
			if user != "" {
				msg = strings.ReplaceAll(msg, user+":"+pw, user+":xxxxx")
			}
			msg = strings.ReplaceAll(msg, ":"+pw+"@", ":xxxxx@")
			msg = strings.ReplaceAll(msg, "password="+pw, "password=xxxxx")
		}
		if !strings.Contains(secret, "://") && len(secret) >= MinSecretLength {
			msg = strings.ReplaceAll(msg, secret, "xxxxx")
		}
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// credentials finds the user and the password, in the spellings it may
// travel in, of a URL or keyword/value connection string.
func credentials(databaseURL string) (user string, passwords []string) {
	if u, err := url.Parse(databaseURL); err == nil && u.User != nil {
		user = u.User.Username()
		if p, ok := u.User.Password(); ok && p != "" {
			passwords = append(passwords, p, url.QueryEscape(p), url.PathEscape(p))
		}
		if raw := strings.SplitN(strings.TrimPrefix(u.String(), u.Scheme+"://"), "@", 2)[0]; strings.Contains(raw, ":") {
			if _, p, _ := strings.Cut(raw, ":"); p != "" {
				passwords = append(passwords, p) // as written in the URL
			}
		}
	}
	if config, err := pgconn.ParseConfig(databaseURL); err == nil && config.Password != "" {
		if user == "" {
			user = config.User
		}
		passwords = append(passwords, config.Password)
	}
	for _, field := range strings.Fields(databaseURL) {
		if v, ok := strings.CutPrefix(field, "password="); ok && v != "" {
			passwords = append(passwords, strings.Trim(v, "'"))
		}
	}
	slices.SortFunc(passwords, func(a, b string) int { return len(b) - len(a) }) // longest first
	return user, slices.Compact(passwords)
}

// IsRowIndependent reports whether err has nothing to do with the rows a
// statement touched: the connection or server is gone, or the statement
// itself is wrong (a syntax error, an undefined column, a missing
// privilege). Retrying the same work row by row would only fail row by row.
func IsRowIndependent(err error) bool {
	if IsConnectionError(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "42", // syntax error or access rule violation
			"0A": // feature not supported
			return true
		}
	}
	return false
}

// IsStatementLimit reports whether err is a statement cut short by a limit
// set on statements, not by anything in its rows: statement_timeout (or a
// cancel request, SQLSTATE 57014) or lock_timeout (55P03). A smaller
// statement may fit the limit; a single row that still hits it is no
// fault of the row's.
func IsStatementLimit(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "57014" || pgErr.Code == "55P03")
}

// IsConnectionLost reports whether err means the connection under a
// statement was lost (terminated by an administrator or a failover, the
// server restarting, the network): a fresh connection may well work, so an
// idempotent statement can be run again. Only real connection failures
// count: a connect that failed (*pgconn.ConnectError) other than by the
// server's verdict on it (a wrong password, a missing database), a network
// error (net.Error), the connection ending mid-message (io.EOF,
// io.ErrUnexpectedEOF), a statement on a connection pgx has already
// closed (pgconn.ErrConnClosed), and the server's connection exceptions
// (SQLSTATE class 08, 57P01–57P03). Errors the client raises about the
// statement itself (a scan type mismatch, a column-count bug, no row),
// cancellations and timeouts do not.
func IsConnectionLost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", // admin_shutdown: pg_terminate_backend, a fast shutdown
			"57P02", // crash_shutdown
			"57P03": // cannot_connect_now: the server is starting or stopping
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection exception
	}
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, pgconn.ErrConnClosed)
}

// IsConnectionError reports whether err means the connection or server is
// gone (as opposed to a statement the server rejected).
func IsConnectionError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true // no server verdict: network, protocol or client error
	}
	switch pgErr.Code[:2] {
	case "08", // connection exception
		"53", // insufficient resources
		"57", // operator intervention: admin shutdown, crash, cancel
		"58", // system error
		"XX": // internal error
		return pgErr.Code != "57014" // query_canceled by statement_timeout is about the statement
	}
	return false
}

// Querier is a pgx pool, connection or transaction: what every statement of
// the project runs on. The public packages name it too (sender.Querier,
// activity.Querier), as aliases, so a bot can pass its own transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ParseUUID returns s, a UUID as pgx reads one (32 hex digits, or 36
// characters with a hyphen between the groups), in the canonical form
// (lower case, hyphenated), or ok false when s is none: a user id checked
// before it reaches a statement.
func ParseUUID(s string) (id string, ok bool) {
	if len(s) == 36 {
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return "", false
		}
		s = s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		return "", false
	}
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], true
}

// Now reads the database clock: the one clock every process agrees on.
func Now(ctx context.Context, db Querier) (time.Time, error) {
	// Read by the column's name: this package's statements cannot be
	// internal/sqlfile's typed ones, which import it.
	rows, err := db.Query(ctx, `SELECT now() AS now`)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	clock, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[struct{ Now time.Time }])
	if err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return clock.Now.UTC(), nil
}

// AsOf is asOf in UTC, or the database clock when asOf is zero: what "no
// --as-of" means for every command.
func AsOf(ctx context.Context, db Querier, asOf time.Time) (time.Time, error) {
	if !asOf.IsZero() {
		return asOf.UTC(), nil
	}
	return Now(ctx, db)
}
