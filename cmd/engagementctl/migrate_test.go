package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
)

// schemaState reads the recorded schema version (-1 when none) and dirty
// flag, and the names of the INVALID indexes in the database.
func schemaState(t *testing.T, url string) (version int64, dirty bool, invalid []string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	v, dirty, recorded := fixture.CtlSchemaVersion(t, conn)
	if !recorded {
		return -1, false, fixture.InvalidIndexes(t, conn)
	}
	return int64(v), dirty, fixture.InvalidIndexes(t, conn)
}

// TestConcurrentMigrateUp: issue 15 saw two `engagementctl migrate up`
// started at once on a fresh database end with one of them exiting 1 with
// "deadlock detected" in 10 of 10 pairs: golang-migrate's waiter blocks in
// pg_advisory_lock inside a statement, and CREATE INDEX CONCURRENTLY waits
// for every transaction older than it, that waiter's included. Here three
// real processes start together, five times over: every one must exit 0,
// leaving the latest clean schema and no INVALID index.
func TestConcurrentMigrateUp(t *testing.T) {
	t.Parallel()
	const rounds, processes = 5, 3
	for round := range rounds {
		url := pgtest.NewEmptyDatabase(t)
		env := cmdtest.Env("DATABASE_URL=" + url)
		results := make([]cmdtest.Result, processes)
		var wg sync.WaitGroup
		for i := range processes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "up")
			}()
		}
		wg.Wait()
		want := fmt.Sprintf("schema version %d of %d\n", migrations.Latest, migrations.Latest)
		for i, res := range results {
			for _, line := range cmdtest.Lines(res.Stderr) {
				if !strings.Contains(line, "another engagementctl migrate is running; waiting") {
					t.Errorf("round %d, process %d: unexpected stderr line %q", round+1, i+1, line)
				}
			}
			if res.Code != 0 || res.Stdout != want {
				t.Errorf("round %d, process %d of %d: exit %d, stdout %q, stderr %q; want exit 0 and %q",
					round+1, i+1, processes, res.Code, res.Stdout, strings.TrimSpace(res.Stderr), want)
			}
		}
		if v, dirty, invalid := schemaState(t, url); v != int64(migrations.Latest) || dirty || len(invalid) > 0 {
			t.Errorf("round %d: schema version %d dirty %v, INVALID indexes %v; want %d, clean, none", round+1, v, dirty, invalid, migrations.Latest)
		}
	}
}

// migrateDownTo runs `engagementctl migrate down N` on the database at url
// to bring its schema down to version: N counts the migration files above
// it (their numbers have gaps).
func migrateDownTo(t *testing.T, url string, version uint) {
	t.Helper()
	v, _, _ := schemaState(t, url)
	files, err := filepath.Glob("../../migrations/*.up.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("the migration files: %v (%d)", err, len(files))
	}
	steps := 0
	for _, f := range files {
		n, err := strconv.ParseInt(strings.SplitN(filepath.Base(f), "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration file %s: %v", f, err)
		}
		if n > int64(version) && n <= v {
			steps++
		}
	}
	if steps == 0 {
		return
	}
	env := cmdtest.Env("DATABASE_URL=" + url)
	res := cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "down", strconv.Itoa(steps))
	if res.Code != 0 {
		t.Fatalf("migrate down: exit %d: %s", res.Code, res.Stderr)
	}
	if !strings.HasPrefix(res.Stdout, fmt.Sprintf("schema version %d of", version)) {
		t.Fatalf("migrate down %d from %d: %q, want version %d", steps, v, res.Stdout, version)
	}
}

// holdWriteLock opens a bot transaction that has written a row of
// transactions and stays open (RowExclusiveLock on it) until the returned
// release is called or the test ends.
func holdWriteLock(t *testing.T, url string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fixture.Transactions(t, tx, fixture.NewID(), time.Now())
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = tx.Rollback(ctx)
			conn.Close(ctx)
		})
	}
	t.Cleanup(release)
	return release
}

// TestMigrateWithTheBotHoldingALock: issue 15 saw a bot transaction open on
// `transactions` leave the schema dirty at version 2 with an INVALID
// transactions_created_at_idx (on today's code, any statement or lock
// timeout does that: golang-migrate marks the version dirty before running
// the CONCURRENTLY build and never clears it). Now the migration fails
// within --lock-timeout with one line saying why, the schema stays at
// version 1, clean, with no INVALID index, and once the bot's transaction
// ends `migrate up` completes.
func TestMigrateWithTheBotHoldingALock(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "up"); res.Code != 0 {
		t.Fatalf("migrate up: exit %d: %s", res.Code, res.Stderr)
	}
	migrateDownTo(t, url, 1)

	release := holdWriteLock(t, url)
	res := cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "up", "--lock-timeout", "1s")
	lines := cmdtest.Lines(res.Stderr)
	if res.Code != 1 || len(lines) != 1 || !strings.Contains(res.Stderr, "lock timeout") || !strings.Contains(res.Stderr, "migration 2") {
		t.Errorf("migrate up with the bot's transaction open: exit %d, stderr %q; want exit 1 and one line naming migration 2 and the lock timeout", res.Code, res.Stderr)
	}
	if v, dirty, invalid := schemaState(t, url); v != 1 || dirty || len(invalid) > 0 {
		t.Errorf("after the failed migrate up: schema version %d dirty %v, INVALID indexes %v; want 1, clean, none", v, dirty, invalid)
	}

	release()
	res = cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "up", "--lock-timeout", "1s")
	if res.Code != 0 {
		t.Errorf("migrate up once the bot's transaction ended: exit %d: %s", res.Code, res.Stderr)
	}
	if v, dirty, invalid := schemaState(t, url); v != int64(migrations.Latest) || dirty || len(invalid) > 0 {
		t.Errorf("after migrate up: schema version %d dirty %v, INVALID indexes %v; want %d, clean, none", v, dirty, invalid, migrations.Latest)
	}
}

// makeInvalidIndex leaves transactions_created_at_idx INVALID, as a
// CONCURRENTLY build that hit a lock timeout does (an older binary, or one
// killed half-way): the bot holds a write lock while the build runs.
func makeInvalidIndex(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	config, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	config.RuntimeParams["lock_timeout"] = "200ms"
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	fixture.CtlDropCreatedAtIndex(t, conn)
	release := holdWriteLock(t, url)
	defer release()
	if err := fixture.CtlBuildCreatedAtIndex(ctx, conn); err == nil {
		t.Fatal("building the index CONCURRENTLY with the bot's transaction open succeeded; want a lock timeout")
	}
	if _, _, invalid := schemaState(t, url); len(invalid) != 1 || invalid[0] != "transactions_created_at_idx" {
		t.Fatalf("INVALID indexes %v, want transactions_created_at_idx", invalid)
	}
}

// TestMigrateUpRebuildsInvalidIndexes: issue 15 found that after a manual
// reset, `migrate up` left transactions_created_at_idx INVALID (CREATE
// INDEX CONCURRENTLY IF NOT EXISTS skips an index that exists, valid or
// not). up must rebuild it, whether its migration is applied or pending.
func TestMigrateUpRebuildsInvalidIndexes(t *testing.T) {
	t.Parallel()
	for _, at := range []uint{1, migrations.Latest} {
		url := pgtest.NewDatabase(t)
		env := cmdtest.Env("DATABASE_URL=" + url)
		// At version 1, migration 2 (which builds the index) is pending.
		migrateDownTo(t, url, at)
		makeInvalidIndex(t, url)
		if res := cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "up"); res.Code != 0 {
			t.Errorf("schema at version %d: migrate up: exit %d: %s", at, res.Code, res.Stderr)
		}
		if v, dirty, invalid := schemaState(t, url); v != int64(migrations.Latest) || dirty || len(invalid) > 0 {
			t.Errorf("schema at version %d with an INVALID index, after migrate up: version %d dirty %v, INVALID indexes %v; want %d, clean, none",
				at, v, dirty, invalid, migrations.Latest)
		}
		if !tableExists(t, url, "transactions_created_at_idx") {
			t.Errorf("schema at version %d: transactions_created_at_idx is missing after migrate up", at)
		}
	}
}

// TestMigrateDirtyAndForce: a schema left dirty (a migrator killed
// half-way) makes `migrate up` and every job fail with one line naming the
// fix, `engagementctl migrate force V`; force repairs it and up completes.
// On today's code up said "Dirty database version 2. Fix and force
// version." and there was no force command.
func TestMigrateDirtyAndForce(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	migrateDownTo(t, url, 1)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(context.Background(), `UPDATE `+migrations.Table+` SET version = 2, dirty = true`)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"migrate", "up"}, {"migrate", "down"}, {"status"}} {
		res := cmdtest.Exec(t, ctl.NewCommand, env, args...)
		if lines := cmdtest.Lines(res.Stderr); res.Code != 1 || len(lines) != 1 || !strings.Contains(res.Stderr, "engagementctl migrate force 1") {
			t.Errorf("engagementctl %s on a schema dirty at 2: exit %d, stderr %q; want exit 1 and one line naming `engagementctl migrate force 1`",
				strings.Join(args, " "), res.Code, res.Stderr)
		}
	}
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "version"); res.Code != 0 || !strings.Contains(res.Stdout, "schema version 2 of") || !strings.Contains(res.Stdout, "dirty") {
		t.Errorf("migrate version on a dirty schema: exit %d, stdout %q; want 0 and version 2, dirty", res.Code, res.Stdout)
	}

	bads := [][]string{{"migrate", "force"}, {"migrate", "force", "two"}, {"migrate", "force", "-1"}, {"migrate", "force", itoa(migrations.Latest + 1)}}
	for v := uint(1); v < migrations.Latest; v++ {
		if !slices.Contains(migrations.Versions(), v) {
			bads = append(bads, []string{"migrate", "force", itoa(v)}) // a number no migration has
			break
		}
	}
	for _, bad := range bads {
		if res := cmdtest.Exec(t, ctl.NewCommand, env, bad...); res.Code != 2 || len(cmdtest.Lines(res.Stderr)) != 1 {
			t.Errorf("engagementctl %s: exit %d, stderr %q; want exit 2 and one line", strings.Join(bad, " "), res.Code, res.Stderr)
		}
	}
	if v, dirty, _ := schemaState(t, url); v != 2 || !dirty {
		t.Fatalf("the rejected force commands changed the schema version to %d (dirty %v)", v, dirty)
	}

	if res := cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "force", "1"); res.Code != 0 || res.Stdout != "schema version 1 of "+itoa(migrations.Latest)+"\n" {
		t.Errorf("migrate force 1: exit %d, stdout %q, stderr %q; want 0 and schema version 1", res.Code, res.Stdout, res.Stderr)
	}
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "up"); res.Code != 0 {
		t.Errorf("migrate up after force: exit %d: %s", res.Code, res.Stderr)
	}
	if v, dirty, invalid := schemaState(t, url); v != int64(migrations.Latest) || dirty || len(invalid) > 0 {
		t.Errorf("after force and up: version %d dirty %v, INVALID indexes %v; want %d, clean, none", v, dirty, invalid, migrations.Latest)
	}
	// force 0: no migration recorded.
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "force", "0"); res.Code != 0 || !strings.HasPrefix(res.Stdout, "schema version 0 of") {
		t.Errorf("migrate force 0: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
}

// TestMigrateWithALongQueryRunning: CREATE INDEX CONCURRENTLY also waits
// for every transaction holding an older snapshot, on any table (a report
// running in the bot's database). Such a wait past --lock-timeout fails the
// build after the index exists, INVALID: the migration must drop it and be
// undone, leaving the schema clean at the version before and no INVALID
// index.
func TestMigrateWithALongQueryRunning(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	migrateDownTo(t, url, 5) // migration 6 builds an index on engagement_state_transitions CONCURRENTLY
	ctx := context.Background()
	report, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer report.Close(ctx)
	pid := report.PgConn().PID()
	done := make(chan error, 1)
	go func() {
		done <- fixture.PgSleep(ctx, report, 60)
	}()
	observer, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close(ctx)
	for !fixture.CtlBackendRunning(t, observer, pid) {
	}
	res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+url), "migrate", "up", "--lock-timeout", "1s")
	if lines := cmdtest.Lines(res.Stderr); res.Code != 1 || len(lines) != 1 || !strings.Contains(res.Stderr, "migration 6 failed and was undone") {
		t.Errorf("migrate up with a long query running: exit %d, stderr %q; want exit 1 and one line saying migration 6 was undone", res.Code, res.Stderr)
	}
	if v, dirty, invalid := schemaState(t, url); v != 5 || dirty || len(invalid) > 0 {
		t.Errorf("after the failed migrate up: schema version %d dirty %v, INVALID indexes %v; want 5, clean, none", v, dirty, invalid)
	}
	fixture.CtlCancelBackend(t, observer, pid)
	<-done
	if res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+url), "migrate", "up"); res.Code != 0 {
		t.Errorf("migrate up once the query ended: exit %d: %s", res.Code, res.Stderr)
	}
	if v, dirty, invalid := schemaState(t, url); v != int64(migrations.Latest) || dirty || len(invalid) > 0 {
		t.Errorf("after migrate up: schema version %d dirty %v, INVALID indexes %v; want %d, clean, none", v, dirty, invalid, migrations.Latest)
	}
}
