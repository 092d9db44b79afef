package pgtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
	"github.com/engagement-scheduler/engagement/migrations"
)

func connectT(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("connect %s: %v", dbURL, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func currentDatabase(t *testing.T, db postgres.Querier) string {
	t.Helper()
	return deref(t, oneT(t, db, kitCurrentDatabaseQuery, sqlfile.None{}).Name)
}

// addProfile writes a bare profile on db and returns its id.
func addProfile(t *testing.T, db postgres.Querier) string {
	t.Helper()
	return oneT(t, db, kitAddProfileQuery, sqlfile.None{}).UserID
}

// countProfiles counts db's profiles among ids (none: every profile).
func countProfiles(t *testing.T, db postgres.Querier, ids ...string) int {
	t.Helper()
	return oneT(t, db, kitCountProfilesQuery, kitCountProfilesArgs{UserIDs: ids}).N
}

// oneT is statement q's first row on db for p; an error fails the test.
func oneT[P sqlfile.Params, R any, PR sqlfile.Row[R]](t *testing.T, db postgres.Querier, q sqlfile.Statement[P, R, PR], p P) R {
	t.Helper()
	r, err := q.One(t.Context(), db, p)
	if err != nil {
		t.Fatalf("queries/%s.sql: %v", q.Name, err)
	}
	return r
}

// deref is *v; a NULL fails the test.
func deref[T any](t *testing.T, v *T) T {
	t.Helper()
	if v == nil {
		t.Fatalf("NULL, want a %T", *new(T))
	}
	return *v
}

func TestNewDatabase(t *testing.T) {
	t.Parallel()
	a, b := NewDatabase(t), NewDatabase(t)
	if a == b {
		t.Fatalf("two calls gave the same database %s", a)
	}
	names := map[string]bool{}
	for _, dbURL := range []string{a, b} {
		conn := connectT(t, dbURL)
		name := currentDatabase(t, conn)
		if !strings.HasPrefix(name, testPrefix) {
			t.Errorf("database %q lacks the prefix %q", name, testPrefix)
		}
		names[name] = true
		if n := countProfiles(t, conn); n != 0 {
			t.Errorf("fresh database has %d user_profiles rows", n)
		}
		if err := migrations.Check(t.Context(), conn); err != nil {
			t.Errorf("schema of %s: %v", name, err)
		}
	}
	if len(names) != 2 {
		t.Errorf("two calls connect to the same database: %v", names)
	}

	// A row written in one database is not visible in the other.
	ca, cb := connectT(t, a), connectT(t, b)
	addProfile(t, ca)
	if n := countProfiles(t, cb); n != 0 {
		t.Errorf("other database sees %d rows, want 0", n)
	}
}

func TestNewDatabaseDroppedInCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		name = currentDatabase(t, connectT(t, NewDatabase(t)))
	})
	srv, err := ServerURL(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if exists := oneT(t, connectT(t, srv), kitDatabaseExistsQuery, kitDatabaseExistsArgs{Datname: name}).Exists; deref(t, exists) {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

func TestNewEmptyDatabase(t *testing.T) {
	t.Parallel()
	conn := connectT(t, NewEmptyDatabase(t))
	_, err := kitCountProfilesQuery.One(t.Context(), conn, kitCountProfilesArgs{UserIDs: nil})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Errorf("user_profiles in an empty database: err = %v, want undefined_table", err)
	}
	if err := migrations.Check(t.Context(), conn); !errors.Is(err, migrations.ErrSchemaOutdated) {
		t.Errorf("Check = %v, want ErrSchemaOutdated", err)
	}
}

func TestNewPool(t *testing.T) {
	t.Parallel()
	pool, dbURL := NewPool(t)
	if _, err := kitCountProfilesQuery.One(t.Context(), pool, kitCountProfilesArgs{UserIDs: nil}); err != nil {
		t.Fatalf("query through the pool on %s: %v", dbURL, err)
	}
}

func TestCreateCloneDropDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	suffix := randomHex(4)
	src, dst := "engagement_pgtest_src_"+suffix, "engagement_pgtest_dst_"+suffix
	t.Cleanup(func() {
		for _, name := range []string{src, dst} {
			if err := DropDatabase(context.Background(), name); err != nil {
				t.Error(err)
			}
		}
	})

	srcURL, err := CreateDatabase(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	conn := connectT(t, srcURL)
	for range 3 {
		addProfile(t, conn)
	}
	// The open connection to src is terminated by CloneDatabase.
	dstURL, err := CloneDatabase(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if n := countProfiles(t, connectT(t, dstURL)); n != 3 {
		t.Errorf("clone has %d user_profiles rows, want 3", n)
	}
	// Cloning again replaces dst.
	if _, err := CloneDatabase(ctx, src, dst); err != nil {
		t.Fatalf("second clone: %v", err)
	}
	// CreateDatabase replaces an existing database with an empty migrated one.
	if srcURL, err = CreateDatabase(ctx, src); err != nil {
		t.Fatal(err)
	}
	if n := countProfiles(t, connectT(t, srcURL)); n != 0 {
		t.Errorf("re-created database has %d rows, want 0", n)
	}
	if err := DropDatabase(ctx, dst); err != nil {
		t.Fatal(err)
	}
	if err := DropDatabase(ctx, dst); err != nil {
		t.Errorf("dropping a missing database: %v", err)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, name, want string }{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "x", "postgres://postgres@127.0.0.1:5432/x?sslmode=disable"},
		{"postgresql://u:p%40ss@db.example:6432/app?sslmode=require&application_name=t", "engagement_test_ab",
			"postgresql://u:p%40ss@db.example:6432/engagement_test_ab?sslmode=require&application_name=t"},
		{"postgres:///app?host=/var/run/postgresql&user=me", "y", "postgres:///y?host=/var/run/postgresql&user=me"},
		{"postgres://h", "z", "postgres://h/z"},
		{"postgres://h/app?dbname=app&sslmode=disable", "z", "postgres://h/z?dbname=z&sslmode=disable"},
		{"host=/tmp port=5433 dbname=app user=me sslmode=disable", "n", "host=/tmp port=5433 user=me sslmode=disable dbname='n'"},
		{"host=h password='a b\\'c' dbname = 'x y'", "it's", `host=h password='a b\'c' dbname='it\'s'`},
	} {
		got, err := WithDatabase(tc.in, tc.name)
		if err != nil || got != tc.want {
			t.Errorf("WithDatabase(%q, %q) = %q, %v; want %q", tc.in, tc.name, got, err, tc.want)
		}
		if _, err := pgx.ParseConfig(got); err != nil {
			t.Errorf("pgx cannot parse %q: %v", got, err)
		} else if cfg, _ := pgx.ParseConfig(got); cfg.Database != tc.name {
			t.Errorf("pgx reads database %q from %q, want %q", cfg.Database, got, tc.name)
		}
	}
	if _, err := WithDatabase("mysql://h/db", "x"); err == nil {
		t.Error("WithDatabase accepted a mysql:// URL")
	}
}

// TestThrowawayCluster runs the third resolution step for real: initdb, start,
// reuse while running, stop, and restart from the existing data directory.
//
// Where the environment supplies the server and no PostgreSQL binaries are
// installed, startThrowaway installs them as it would for any test run:
// the test never skips.
func TestThrowawayCluster(t *testing.T) {
	t.Parallel()
	base, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil { // as root, the cluster runs as postgres and must reach it
		t.Fatal(err)
	}
	dir := filepath.Join(base, "data")
	const port = 54339
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if _, err := stopThrowaway(context.Background(), dir); err != nil {
			t.Errorf("stop: %v", err)
		}
		os.RemoveAll(base)
	})

	check := func(step string, wantStarted bool) {
		t.Helper()
		start := time.Now()
		dbURL, started, err := startThrowaway(ctx, dir, port, false)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if started != wantStarted {
			t.Errorf("%s: started = %v, want %v", step, started, wantStarted)
		}
		t.Logf("%s: %s in %v", step, dbURL, time.Since(start).Round(time.Millisecond))
		if want := throwawayURL(port); dbURL != want {
			t.Errorf("%s: URL %q, want %q", step, dbURL, want)
		}
		conn := connectT(t, dbURL)
		settings := oneT(t, conn, kitSettingsQuery, sqlfile.None{})
		if settings.Fsync != "off" {
			t.Errorf("%s: fsync = %q, want off", step, settings.Fsync)
		}
		if settings.WalLevel != "minimal" {
			t.Errorf("%s: wal_level = %q, want minimal (the cluster streams to no standby)", step, settings.WalLevel)
		}
		conn.Close(ctx)
	}

	check("initdb and start", true)
	if _, err := os.Stat(filepath.Join(dir, markerConf)); err != nil {
		t.Errorf("marker config missing: %v", err)
	}
	if _, err := os.Stat(dir + ".init"); !os.IsNotExist(err) {
		t.Errorf("initdb work directory left behind: %v", err)
	}
	check("reuse the running cluster", false)
	if stopped, err := stopThrowaway(ctx, dir); err != nil || !stopped {
		t.Fatalf("stop: stopped %v, %v; want a running cluster stopped", stopped, err)
	}
	if ping(ctx, throwawayURL(port)) == nil {
		t.Fatal("the cluster still answers after stopThrowaway")
	}
	if stopped, err := stopThrowaway(ctx, dir); err != nil || stopped {
		t.Errorf("stopping a stopped cluster: stopped %v, %v; want nothing done", stopped, err)
	}
	check("restart the existing data directory", true)
}

func TestStopThrowawayIgnoresForeignDirectories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "PG_VERSION"), []byte("15\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if stopped, err := stopThrowaway(t.Context(), dir); err != nil || stopped {
		t.Errorf("stopThrowaway on a directory pgtest did not create: stopped %v, %v", stopped, err)
	}
	if stopped, err := stopThrowaway(t.Context(), filepath.Join(dir, "missing")); err != nil || stopped {
		t.Errorf("stopThrowaway on a missing directory: stopped %v, %v", stopped, err)
	}
}

// The clusters live in memory where the machine has room there (issue 60:
// ext4's search past recently deleted inodes was a tenth of the suite's
// CPU), once there stay there, and a cluster an earlier version started in
// $TMPDIR keeps being used while it runs, so that no process of a run
// picks another.
func TestTheThrowawayClusterLivesInMemoryWhereThereIsRoom(t *testing.T) {
	t.Parallel()
	tmp, mem := t.TempDir(), t.TempDir() // mem stands in for /dev/shm
	disk, inMemory := filepath.Join(tmp, clusterName), filepath.Join(mem, clusterName)
	pick := func(room bool) string {
		roomy := ""
		if room {
			roomy = mem
		}
		return clusterDir(tmp, mem, roomy)
	}
	for _, c := range []struct {
		what      string
		got, want string
	}{
		{"memory with room", pick(true), inMemory},
		{"memory without room", pick(false), disk},
		{"no memory file system", clusterDir(tmp, "", ""), disk},
	} {
		if c.got != c.want {
			t.Errorf("%s: the cluster's folder is %s, want %s", c.what, c.got, c.want)
		}
	}
	if err := os.MkdirAll(inMemory, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inMemory, markerConf), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := pick(false); got != inMemory {
		t.Errorf("a cluster in memory, the room since shrunk: the cluster's folder is %s, want %s", got, inMemory)
	}

	// A postgres of an earlier run, recorded as the one started in
	// $TMPDIR: a process named postgres (a copy of sleep), as
	// localsvc.Recorded checks the recorded process's name and start.
	sleep, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(t.TempDir(), "postgres")
	if err := os.WriteFile(fake, sleep, 0o700); err != nil { //nolint:gosec // the test's own copy of sleep, run below
		t.Fatal(err)
	}
	cmd := exec.Command(fake, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck // gone either way
	if err := localsvc.RecordProcess(startedFile(disk), cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if got := pick(true); got != disk {
		t.Errorf("with the cluster in $TMPDIR running, the cluster's folder is %s, want %s", got, disk)
	}
	cmd.Process.Kill() //nolint:errcheck // waited for next
	cmd.Wait()         //nolint:errcheck // killed
	if got := pick(true); got != inMemory {
		t.Errorf("once the cluster in $TMPDIR stopped, the cluster's folder is %s, want %s", got, inMemory)
	}
}

// The kit takes /dev/shm when it is a tmpfs with the room asked for, as
// /proc/mounts and df say, and never while TMPDIR is set.
func TestMemoryRootIsATmpfsWithRoom(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	if got := memory(0); got != "" {
		t.Errorf("with TMPDIR set, memory is %q, want none", got)
	}
	tmpfs, room := shmIsTmpfs(t)
	if got, want := memoryRoot(0) != "", tmpfs; got != want {
		t.Errorf("memoryRoot took /dev/shm: %v; /dev/shm a tmpfs: %v", got, want)
	}
	if tmpfs && memoryRoot(room+1<<30) != "" {
		t.Errorf("memoryRoot takes /dev/shm with less room than asked")
	}

	// TMPDIR unset: the tests' own clusters go to memory with room, and
	// services-stop looks for their leftovers there too.
	t.Setenv("TMPDIR", "")
	wantRoot, wantRoots := os.TempDir(), []string{os.TempDir()}
	if tmpfs {
		wantRoots = append(wantRoots, "/dev/shm")
		if room >= minMemoryRoot {
			wantRoot = "/dev/shm"
		}
	}
	if got := scratchRoot(); got != wantRoot {
		t.Errorf("TMPDIR unset: the scratch root is %s, want %s", got, wantRoot)
	}
	if got := scratchRoots(); !slices.Equal(got, wantRoots) {
		t.Errorf("TMPDIR unset: leftovers are looked for in %v, want %v", got, wantRoots)
	}
}

// shmIsTmpfs reads from /proc/mounts whether /dev/shm is a tmpfs, and
// from df its free bytes.
func shmIsTmpfs(t *testing.T) (bool, uint64) {
	t.Helper()
	mounts, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return false, 0
	}
	tmpfs := false
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "/dev/shm" {
			tmpfs = f[2] == "tmpfs"
		}
	}
	if !tmpfs {
		return false, 0
	}
	out, err := exec.Command("df", "--output=avail", "-B1", "/dev/shm").Output()
	if err != nil {
		t.Fatalf("df /dev/shm: %v", err)
	}
	f := strings.Fields(string(out))
	room, err := strconv.ParseUint(f[len(f)-1], 10, 64)
	if err != nil {
		t.Fatalf("df /dev/shm: %q: %v", out, err)
	}
	return true, room
}

// TestClusterRestart checks a test's own cluster: migrated, restarted the
// way the fault tests need, ending open sessions and keeping what was
// committed, and its own.
func TestClusterRestart(t *testing.T) {
	t.Parallel()
	c := NewCluster(t)
	ctx := t.Context()
	before := connectT(t, c.URL)
	if err := migrations.Check(ctx, before); err != nil {
		t.Fatalf("the cluster's database is not migrated: %v", err)
	}
	kept := addProfile(t, before)

	c.Restart(t)

	if err := before.Ping(ctx); err == nil {
		t.Error("a session open across the restart still works; want it ended")
	}
	after := connectT(t, c.URL)
	if n := countProfiles(t, after, kept); n != 1 {
		t.Errorf("after the restart: %d profiles %s, want the committed 1", n, kept)
	}
	// Clusters are copies of one prepared cluster (clusterTemplate): what
	// one test's cluster committed is not in the next one's.
	other := connectT(t, NewCluster(t).URL)
	if n := countProfiles(t, other, kept); n != 0 {
		t.Errorf("another test's cluster holds %d profiles %s, want none", n, kept)
	}
}
