package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Store remembers keys for a while.
type Store interface {
	// Check records key and reports whether it was new (true) or seen
	// within its TTL (false). ttl <= 0 means Options.TTL. Atomic under
	// concurrency: of N concurrent Checks of one new key exactly one gets
	// true.
	Check(ctx context.Context, key string, ttl time.Duration) (isNew bool, err error)
	// StoreResult keeps a result for key, for the key's remaining TTL, or
	// for ttl (Options.TTL when ttl <= 0) if the key is unknown or expired,
	// in which case the key is recorded too.
	StoreResult(ctx context.Context, key string, result []byte, ttl time.Duration) error
	// GetResult returns the result stored for key; found is false when
	// there is none or the key has expired.
	GetResult(ctx context.Context, key string) (result []byte, found bool, err error)
}

// Forgetter is implemented by stores that can drop a key (and its result)
// before its TTL: Wrap uses it to let a failed run be retried. Both Postgres
// and Redis implement it.
type Forgetter interface {
	Forget(ctx context.Context, key string) error
}

const (
	// DefaultTTL is how long a key is remembered when neither the call nor
	// Options says.
	DefaultTTL = 24 * time.Hour
	// DefaultPrefix is prepended to every key when Options.Prefix is empty.
	DefaultPrefix = "idempotency:"
	// DefaultTimeout bounds each store operation when Options.Timeout is 0.
	DefaultTimeout = 2 * time.Second
)

// FailMode says what a store does when its backend is unreachable.
type FailMode int

const (
	// FailClosed returns the store's error, wrapped as "idempotency store: ...".
	FailClosed FailMode = iota
	// FailOpen treats the key as new (Check returns true), stores and finds
	// no result, logs at warn and returns no error.
	FailOpen
)

func (m FailMode) String() string {
	switch m {
	case FailClosed:
		return "closed"
	case FailOpen:
		return "open"
	}
	return fmt.Sprintf("FailMode(%d)", int(m))
}

// ErrInProgress is returned (by Wrap) for a duplicate whose first run has not
// stored a result yet: it is still running, or it died without forgetting
// its key (the key then frees up when its TTL ends).
var ErrInProgress = errors.New("idempotency: an operation with this key is in progress")

// ErrEmptyKey is returned by Wrap when the key function returns "".
var ErrEmptyKey = errors.New("idempotency: empty key")

// Options configures a store. The zero value is usable.
type Options struct {
	// Prefix is prepended to every key in the backing store; default
	// DefaultPrefix.
	Prefix string
	// TTL is used when a call passes ttl <= 0; default DefaultTTL.
	TTL time.Duration
	// FailMode says what happens when the store is unreachable; default
	// FailClosed.
	FailMode FailMode
	// Logger receives the FailOpen warnings. They carry the store, the
	// operation, the prefix, the first 12 hex digits of the key's SHA-256
	// and the error; never a key or a value. The zero Logger logs nothing.
	Logger zerolog.Logger
	// Now is the clock of the PostgreSQL store's expiry (tests move it);
	// default time.Now. Redis expires keys itself.
	Now func() time.Time
	// Timeout bounds each store operation; running out of it counts as
	// "unreachable". Default DefaultTimeout.
	Timeout time.Duration
}

// Stats counts a store's operations since it was made: how many, how long
// they took in all, and how many failed (a failure the store failed open
// on included). Both stores have a Stats method; queue-process reports
// them as its dedupe check metrics.
type Stats struct {
	Ops      int64
	Errors   int64
	Duration time.Duration
}

// stats is Stats, safe for concurrent use.
type stats struct {
	ops, errors, nanos atomic.Int64
}

// base holds what both stores share: the options with defaults filled in.
type base struct {
	kind     string // "postgres" or "redis", for errors and logs
	prefix   string
	ttl      time.Duration
	failMode FailMode
	log      zerolog.Logger
	now      func() time.Time
	timeout  time.Duration
	stats    *stats
}

// Stats reports the store's operations so far.
func (b *base) Stats() Stats {
	return Stats{Ops: b.stats.ops.Load(), Errors: b.stats.errors.Load(), Duration: time.Duration(b.stats.nanos.Load())}
}

func newBase(kind string, o Options) base {
	b := base{kind: kind, prefix: o.Prefix, ttl: o.TTL, failMode: o.FailMode, log: o.Logger, now: o.Now, timeout: o.Timeout, stats: &stats{}}
	if b.prefix == "" {
		b.prefix = DefaultPrefix
	}
	if b.ttl <= 0 {
		b.ttl = DefaultTTL
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.timeout <= 0 {
		b.timeout = DefaultTimeout
	}
	return b
}

func (b *base) ttlOr(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return b.ttl
	}
	return ttl
}

// opContext bounds one operation; its cancel, deferred by every operation,
// also counts the operation and its time in Stats.
func (b *base) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	start := time.Now()
	octx, cancel := context.WithTimeout(ctx, b.timeout)
	return octx, func() {
		cancel()
		b.stats.ops.Add(1)
		b.stats.nanos.Add(int64(time.Since(start)))
	}
}

// fail turns an operation's error into the store's answer: nil when the
// store is unreachable and the mode is FailOpen (after logging a warning),
// else the error wrapped. ctx is the caller's context: when it is done, the
// error is the caller's, not the store's, and is returned in either mode.
func (b *base) fail(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() == nil { // the caller's own cancellation is not the store's failure
		b.stats.errors.Add(1)
	}
	if ctx.Err() == nil && Unreachable(err) && b.failMode == FailOpen {
		b.log.Warn().Err(err).
			Str("store", b.kind).
			Str("op", op).
			Str("prefix", b.prefix).
			Str("key_sha256", keyHash(key)).
			Msg("idempotency store unreachable; failing open (treating the key as new)")
		return nil
	}
	return fmt.Errorf("idempotency store: %s %s: %w", b.kind, op, err)
}

// keyHash identifies a key in logs without revealing it.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

// Unreachable reports whether err means the store could not be reached (as
// opposed to refusing the request): a failed connection, a network error, a
// connection lost mid-request, or a timeout. The stores' fail modes apply to
// these errors only.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 connection_exception; 57P01-57P03 the server shutting
		// down or starting up.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	if pgconn.Timeout(err) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	for _, target := range []error{
		io.EOF, io.ErrUnexpectedEOF, net.ErrClosed,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH,
		redis.ErrClosed, redis.ErrPoolTimeout, redis.ErrPoolExhausted,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// ParseStore builds a store from a spec: "postgres" (a Postgres store on
// pool, which must not be nil) or a go-redis URL, "redis://[user:password@]host:port/db"
// ("rediss://" for TLS, "unix://" for a socket). A Redis store built here
// owns its client: close it with Close (the Store implements io.Closer).
func ParseStore(spec string, pool *pgxpool.Pool, opts Options) (Store, error) {
	if err := CheckSpec(spec); err != nil {
		return nil, err
	}
	switch s := strings.TrimSpace(spec); {
	case isPostgresSpec(s):
		if pool == nil {
			return nil, errors.New(`idempotency: store "postgres" needs a database pool`)
		}
		return NewPostgres(pool, opts), nil
	default:
		o, _ := redis.ParseURL(s) // CheckSpec parsed it
		r := NewRedis(redis.NewClient(o), opts)
		r.owned = true
		return r, nil
	}
}

// CheckSpec reports whether ParseStore would accept spec, without opening
// anything: a command line can be checked before any connection is made.
func CheckSpec(spec string) error {
	s := strings.TrimSpace(spec)
	switch {
	case isPostgresSpec(s):
		return nil
	case strings.HasPrefix(s, "redis://") || strings.HasPrefix(s, "rediss://") || strings.HasPrefix(s, "unix://"):
		if _, err := redis.ParseURL(s); err != nil {
			return fmt.Errorf("idempotency: store %s: %w", redact(s), err)
		}
		return nil
	}
	return fmt.Errorf(`idempotency: unknown store %q: want "postgres" or a redis:// URL`, redact(spec))
}

func isPostgresSpec(s string) bool { return s == "postgres" || s == "postgresql" }

// redact hides the password of a URL for error messages.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil && strings.Contains(s, "://") {
		return u.Redacted()
	}
	return s
}
