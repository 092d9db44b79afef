// Package pgtest gives tests (and the demo and benchmarks) real PostgreSQL
// databases. There is no mock: every database it hands out lives on a real
// server, found or started as follows, once per process (ServerURL):
//
//  1. TEST_DATABASE_URL if set, else DATABASE_URL if set, used as-is. The
//     role must be allowed to CREATE and DROP DATABASE.
//  2. Else PGTEST_PROBE_URL (default
//     postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable), if a
//     connection and ping succeed within about 2 seconds and the role may
//     create databases. Set PGTEST_PROBE_URL=none to skip the probe.
//  3. Else a throwaway cluster that this package starts itself: data
//     directory PGTEST_DIR (default /dev/shm/engagement-pgtest when TMPDIR
//     is unset and /dev/shm is a tmpfs with 2 GiB free, else
//     $TMPDIR/engagement-pgtest, e.g. /tmp/engagement-pgtest), port
//     PGTEST_PORT (default 54329), listening on
//     127.0.0.1 only with trust authentication for the user postgres, and
//     tuned for speed over durability (fsync=off). pg_ctl and initdb are taken
//     from PATH or the newest /usr/lib/postgresql/*/bin; when missing, the
//     postgresql package is installed with apt-get (as root, or through
//     sudo -n). As root, initdb and the server run as the postgres system
//     user. The cluster is left running so the next run reuses it (unless
//     the program stops it, see WillStopThrowaway); stop it with
//     `make services-stop` or `go run ./internal/testkit/pgtest/devdb --stop` (or
//     pg_ctl -D DIR stop).
//     Its log is DIR.log, and DIR.lock serializes test processes that race to
//     start it. A server already answering on the port is used only when it
//     is that cluster (its data directory is DIR and its system identifier
//     the one in DIR's pg_control); any other (another checkout's, a
//     chroot's) is refused, with what to do.
//
// Each NewDatabase call copies a template database (engagement_tmpl_<hash>)
// that is created and migrated once per server and migration set; parallel
// test binaries coordinate its creation with an advisory lock. Test
// databases are named engagement_test_<hex> and dropped in t.Cleanup; ones
// leaked by killed test runs are swept after a day.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
	"github.com/engagement-scheduler/engagement/migrations"
)

// schemaRevision is part of the template database's name. Bump it to force
// every server to rebuild its template (for example after editing an
// already-applied migration file in a way the hash below cannot see).
const schemaRevision = "1"

const (
	defaultProbeURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

	templatePrefix = "engagement_tmpl_"
	buildPrefix    = "engagement_building_"
	testPrefix     = "engagement_test_"

	// templateLockKey is the pg_advisory_lock key that serializes template
	// creation across test processes ("engagemt").
	templateLockKey int64 = 0x656e676167656d74

	// setupTimeout bounds finding or starting the server (which may include
	// installing PostgreSQL) plus creating a database.
	setupTimeout = 10 * time.Minute

	// staleTestDatabase is the age after which a leaked test database is
	// dropped by the next process that prepares the template.
	staleTestDatabase = 24 * time.Hour
)

var server = localsvc.Resolver{Timeout: setupTimeout, Find: resolveServer}

// ServerURL returns the URL of a PostgreSQL server on which the caller may
// CREATE and DROP DATABASE; see the package comment for how it is found. The
// answer (or error) is computed once per process. Cancelling ctx abandons the
// wait without spoiling the cached answer.
func ServerURL(ctx context.Context) (string, error) { return server.URL(ctx) }

func resolveServer(ctx context.Context) (string, error) {
	for _, env := range []string{"TEST_DATABASE_URL", "DATABASE_URL"} {
		if u := os.Getenv(env); u != "" {
			return u, nil
		}
	}
	probe := os.Getenv("PGTEST_PROBE_URL")
	if probe == "" {
		probe = defaultProbeURL
	}
	var probeErr error
	if probe == "none" {
		probeErr = errors.New("skipped (PGTEST_PROBE_URL=none)")
	} else if probeErr = probeServer(ctx, probe); probeErr == nil {
		return probe, nil
	}
	dir, port, err := throwawayConfig()
	if err != nil {
		return "", err
	}
	u, started, err := startThrowaway(ctx, dir, port, false)
	if started {
		startedHere.Store(true)
	}
	if err != nil {
		return "", fmt.Errorf("TEST_DATABASE_URL and DATABASE_URL are unset, the probe of %s failed (%v), "+
			"and starting a throwaway cluster in %s failed: %w\n"+
			"Install the postgresql package or set DATABASE_URL to a server where this user may create databases",
			redact(probe), probeErr, dir, err)
	}
	fmt.Fprintln(os.Stderr, throwawayNotice(dir, port, started, stopsThrowaway.Load()))
	return u, nil
}

// probeServer checks that url answers within about 2 seconds and that its
// role may create databases.
func probeServer(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = 2 * time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	role, err := kitCanCreateDatabasesQuery.One(ctx, conn, sqlfile.None{})
	if err != nil {
		return err
	}
	if !role.CanCreate {
		return errors.New("the role may not create databases")
	}
	return nil
}

// NewDatabase creates a fresh, migrated database for one test and returns its
// URL. The database is dropped in t.Cleanup. Any failure is fatal.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return newTestDatabase(t, true)
}

// NewEmptyDatabase is NewDatabase without migrations: the database has no
// schema at all.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	return newTestDatabase(t, false)
}

// NewPool returns a pool on a fresh migrated database (see NewDatabase) and
// that database's URL. The pool is the binaries' own (postgres.Open: exec
// mode, statement timeout, size), so a test runs its statements as the
// shipped binaries send them. The pool is closed in t.Cleanup before the
// database is dropped.
func NewPool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	dbURL := NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := postgres.Open(ctx, dbURL, "pgtest")
	if err != nil {
		t.Fatalf("pgtest: open pool on %s: %v", redact(dbURL), err)
	}
	t.Cleanup(pool.Close) // registered after NewDatabase's drop, so it runs first
	return pool, dbURL
}

func newTestDatabase(t testing.TB, migrated bool) string {
	t.Helper()
	return newDatabaseFromTemplate(t, func(ctx context.Context, srv string) (string, error) {
		if !migrated {
			return "template0", nil
		}
		return ensureTemplate(ctx, srv)
	})
}

// newDatabaseFromTemplate creates a database for one test as a copy of
// the template database template names (preparing it first if need be),
// and drops it in t.Cleanup. Any failure is fatal.
func newDatabaseFromTemplate(t testing.TB, template func(ctx context.Context, srv string) (string, error)) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	srv, err := ServerURL(ctx)
	if err != nil {
		t.Fatalf("pgtest: no PostgreSQL server for tests: %v", err)
	}
	tmpl, err := template(ctx, srv)
	if err != nil {
		t.Fatalf("pgtest: prepare the template database on %s: %v", redact(srv), err)
	}
	name := testPrefix + fmt.Sprintf("%08x", uint32(time.Now().Unix())) + randomHex(4)
	dbURL, err := createDatabase(ctx, srv, name, tmpl, false)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropDatabase(ctx, srv, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return dbURL
}

// CreateDatabase creates a migrated database called name on the server
// (dropping any existing database of that name first) and returns its URL.
func CreateDatabase(ctx context.Context, name string) (string, error) {
	srv, err := ServerURL(ctx)
	if err != nil {
		return "", err
	}
	tmpl, err := ensureTemplate(ctx, srv)
	if err != nil {
		return "", fmt.Errorf("prepare the migrated template database on %s: %w", redact(srv), err)
	}
	return createDatabase(ctx, srv, name, tmpl, true)
}

// CloneDatabase creates database dst as a copy of database src (dropping dst
// first) and returns dst's URL. Other sessions connected to src are
// terminated, since PostgreSQL can only copy a database nobody is using.
func CloneDatabase(ctx context.Context, src, dst string) (string, error) {
	srv, err := ServerURL(ctx)
	if err != nil {
		return "", err
	}
	conn, err := connect(ctx, srv)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+quote(dst)+` WITH (FORCE)`); err != nil {
		return "", fmt.Errorf("drop database %s: %w", dst, err)
	}
	for attempt := 1; ; attempt++ {
		_, err := kitDisconnectQuery.Exec(ctx, conn, kitDisconnectArgs{Datname: src})
		if err != nil {
			return "", fmt.Errorf("disconnect the users of database %s: %w", src, err)
		}
		err = createFromTemplate(ctx, conn, srv, dst, src)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" && attempt < 5 { // object_in_use: someone reconnected
			continue
		}
		if err != nil {
			return "", fmt.Errorf("create database %s as a copy of %s: %w", dst, src, err)
		}
		return WithDatabase(srv, dst)
	}
}

// DropDatabase drops database name (WITH (FORCE), disconnecting its users) if
// it exists.
func DropDatabase(ctx context.Context, name string) error {
	srv, err := ServerURL(ctx)
	if err != nil {
		return err
	}
	return dropDatabase(ctx, srv, name)
}

func createDatabase(ctx context.Context, srv, name, tmpl string, replace bool) (string, error) {
	conn, err := connect(ctx, srv)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if replace {
		if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+quote(name)+` WITH (FORCE)`); err != nil {
			return "", fmt.Errorf("drop database %s: %w", name, err)
		}
	}
	if err := createFromTemplate(ctx, conn, srv, name, tmpl); err != nil {
		return "", fmt.Errorf("create database %s from template %s on %s: %w", name, tmpl, redact(srv), err)
	}
	return WithDatabase(srv, name)
}

// copyStrategies is how CREATE DATABASE copies a template on each server:
// FILE_COPY from PostgreSQL 15 on. Its default there, WAL_LOG, reads every
// block of the template through shared buffers and writes it to the WAL;
// FILE_COPY copies the files after a checkpoint, which the throwaway
// cluster, without fsync, makes cheaply. The suite copies some 400
// databases: 494 s of CPU with WAL_LOG, 460 s with FILE_COPY (issue 60;
// docs/development.md, "The fifth pass").
var copyStrategies sync.Map // server URL -> the STRATEGY clause, or ""

// createFromTemplate creates database name on conn's server srv as a copy
// of the database tmpl.
func createFromTemplate(ctx context.Context, conn *pgx.Conn, srv, name, tmpl string) error {
	strategy, ok := copyStrategies.Load(srv)
	if !ok {
		v, err := kitServerVersionQuery.One(ctx, conn, sqlfile.None{})
		if err != nil {
			return fmt.Errorf("read the server's version: %w", err)
		}
		strategy = ""
		if v.Version >= 150000 {
			strategy = " STRATEGY FILE_COPY"
		}
		copyStrategies.Store(srv, strategy)
	}
	_, err := conn.Exec(ctx, `CREATE DATABASE `+quote(name)+` TEMPLATE `+quote(tmpl)+strategy.(string))
	return err
}

func dropDatabase(ctx context.Context, srv, name string) error {
	conn, err := connect(ctx, srv)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+quote(name)+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

var templates = struct {
	sync.Mutex
	ready map[string]bool // server URL and template name -> template known to exist
}{ready: map[string]bool{}}

// templateName names the migrated template database after the migration set.
func templateName() string {
	return templatePrefix + migrationsHash()
}

// migrationsHash hashes migrations.Latest, schemaRevision and the names and
// contents of the migration files embedded in the test binary, so editing a
// migration in place also yields a new template. The embedded files, not
// the ones beside this source file: git worktrees share Go's build cache,
// and a package compiled in one checkout reports that checkout's path.
func migrationsHash() string {
	h := sha256.New()
	fmt.Fprintf(h, "latest=%d\nrevision=%s\n%s\n", migrations.Latest, schemaRevision, migrations.Fingerprint())
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// ensureTemplate makes sure the migrated template database exists on srv and
// returns its name. Concurrent processes serialize on an advisory lock; the
// template is built under a temporary name and renamed when complete, so a
// half-built template is never copied.
func ensureTemplate(ctx context.Context, srv string) (string, error) {
	return ensureTemplateFor(ctx, srv, templateName(), migrations.Up)
}

// NewDatabaseFrom creates a fresh database for one test, as a copy of a
// template database that build prepares once per server (from an empty
// database) under the name engagement_tmpl_<key>; key must change whenever
// what build makes changes. The database is dropped in t.Cleanup.
func NewDatabaseFrom(t testing.TB, key string, build func(ctx context.Context, url string) error) string {
	t.Helper()
	h := sha256.Sum256([]byte(key))
	name := templatePrefix + hex.EncodeToString(h[:])[:12]
	return newDatabaseFromTemplate(t, func(ctx context.Context, srv string) (string, error) {
		return ensureTemplateFor(ctx, srv, name, build)
	})
}

// ensureTemplateFor is ensureTemplate for the template called name, made
// by build.
func ensureTemplateFor(ctx context.Context, srv, name string, build func(ctx context.Context, url string) error) (string, error) {
	key := srv + " " + name
	templates.Lock()
	defer templates.Unlock()
	if templates.ready[key] {
		return name, nil
	}
	conn, err := connect(ctx, srv)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if _, err := kitTemplateLockQuery.Exec(ctx, conn, kitTemplateLockArgs{Key: templateLockKey}); err != nil {
		return "", fmt.Errorf("take the template lock: %w", err)
	}
	defer kitTemplateUnlockQuery.Exec(context.Background(), conn, kitTemplateUnlockArgs{Key: templateLockKey}) //nolint:errcheck // closing the connection releases it anyway

	found, err := kitDatabaseExistsQuery.One(ctx, conn, kitDatabaseExistsArgs{Datname: name})
	if err != nil {
		return "", fmt.Errorf("look for template %s: %w", name, err)
	}
	if found.Exists == nil || !*found.Exists {
		// Builds left behind by killed processes: nobody else builds while we hold the lock.
		for _, leftover := range databasesLike(ctx, conn, buildPrefix) {
			conn.Exec(ctx, `DROP DATABASE IF EXISTS `+quote(leftover)+` WITH (FORCE)`) //nolint:errcheck // best effort
		}
		building := buildPrefix + strings.TrimPrefix(name, templatePrefix) + "_" + randomHex(4)
		if err := createFromTemplate(ctx, conn, srv, building, "template0"); err != nil {
			return "", fmt.Errorf("create database %s: %w", building, err)
		}
		buildURL, err := WithDatabase(srv, building)
		if err == nil {
			err = build(ctx, buildURL)
		}
		if err == nil {
			_, err = conn.Exec(ctx, `ALTER DATABASE `+quote(building)+` RENAME TO `+quote(name))
		}
		if err != nil {
			conn.Exec(context.Background(), `DROP DATABASE IF EXISTS `+quote(building)+` WITH (FORCE)`) //nolint:errcheck // best effort
			return "", fmt.Errorf("build template %s (migrating %s): %w", name, building, err)
		}
	}
	sweepStaleTestDatabases(ctx, conn)
	templates.ready[key] = true
	return name, nil
}

// sweepStaleTestDatabases drops test databases whose creation time (the first
// 8 hex digits after the prefix) is over a day old: leftovers of test runs that
// were killed before their cleanup ran. Databases still in use are left alone.
func sweepStaleTestDatabases(ctx context.Context, conn *pgx.Conn) {
	for _, name := range databasesLike(ctx, conn, testPrefix) {
		suffix := strings.TrimPrefix(name, testPrefix)
		if len(suffix) < 8 {
			continue
		}
		created, err := strconv.ParseUint(suffix[:8], 16, 32)
		if err != nil || time.Since(time.Unix(int64(created), 0)) < staleTestDatabase {
			continue
		}
		conn.Exec(ctx, `DROP DATABASE IF EXISTS `+quote(name)) //nolint:errcheck // best effort
	}
}

func databasesLike(ctx context.Context, conn *pgx.Conn, prefix string) []string {
	pattern := strings.ReplaceAll(prefix, "_", `\_`) + "%"
	rows, _ := kitDatabasesLikeQuery.All(ctx, conn, kitDatabasesLikeArgs{Pattern: pattern})
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Datname
	}
	return names
}

func connect(ctx context.Context, srv string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, srv)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact(srv), err)
	}
	return conn, nil
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// redact hides the password of a URL for error messages.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil && strings.Contains(s, "://") {
		return u.Redacted()
	}
	return s
}

// WithDatabase returns dbURL with its database name replaced by name, keeping
// the user, host, port and query parameters (sslmode, host=/socket/dir, ...).
// Both postgres:// URLs and keyword=value connection strings are accepted.
func WithDatabase(dbURL, name string) (string, error) {
	if strings.HasPrefix(dbURL, "postgres://") || strings.HasPrefix(dbURL, "postgresql://") {
		u, err := url.Parse(dbURL)
		if err != nil {
			return "", fmt.Errorf("parse database URL: %w", err)
		}
		u.Path, u.RawPath = "/"+name, ""
		if q := u.Query(); q.Has("dbname") {
			q.Set("dbname", name)
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	if strings.Contains(dbURL, "://") {
		return "", fmt.Errorf("database URL %q: scheme is not postgres:// or postgresql://", redact(dbURL))
	}
	pairs, err := splitConnString(dbURL)
	if err != nil {
		return "", err
	}
	var out []string
	for _, p := range pairs {
		if p[0] != "dbname" {
			out = append(out, p[0]+"="+p[1])
		}
	}
	esc := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(name)
	return strings.Join(append(out, "dbname='"+esc+"'"), " "), nil
}

// splitConnString splits a keyword=value connection string into keywords and
// raw (still quoted) values.
func splitConnString(s string) ([][2]string, error) {
	var pairs [][2]string
	for {
		s = strings.TrimLeft(s, " \t\n\r\v\f")
		if s == "" {
			return pairs, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, fmt.Errorf("connection string: missing = after %q", s)
		}
		key := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t\n\r\v\f")
		end, quoted := 0, strings.HasPrefix(s, "'")
		if quoted {
			end = 1
		}
		for ; end < len(s); end++ {
			c := s[end]
			if c == '\\' {
				end++
				continue
			}
			if quoted && c == '\'' {
				end++
				break
			}
			if !quoted && strings.IndexByte(" \t\n\r\v\f", c) >= 0 {
				break
			}
		}
		if end > len(s) {
			end = len(s)
		}
		pairs = append(pairs, [2]string{key, s[:end]})
		s = s[end:]
	}
}

// value is the only column of sql's first row (pgx.ErrNoRows without
// one): the test kit's one-value reads of the server's catalogs and
// settings, outside any package's typed statements; pgx.RowTo fails on a
// row of more than one column, so no column is read for another.
func value[T any](ctx context.Context, conn *pgx.Conn, sql string, args ...any) (T, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		var zero T
		return zero, err
	}
	return pgx.CollectOneRow(rows, pgx.RowTo[T])
}
