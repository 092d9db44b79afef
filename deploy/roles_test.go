package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// The tests of deploy/sql/roles.sql run it on a real server, as psql would
// (its psql meta-commands and variables interpreted by psqlScript below),
// then run the real binaries as the least-privilege login role it creates.
// Roles are cluster-wide: every test names its own (random suffix) and
// drops them when it ends. The server's role (pgtest) must be allowed to
// create roles and hand tables over, as a superuser is.

// wantPrivileges is what the jobs' role may do on each table of the
// migrated schema: exactly these, and nothing on a table not listed. A
// migration that adds a table fails TestRolesScriptGrantsExactlyWhatTheJobsUse
// until roles.sql (and this list) says what the jobs may do with it.
var wantPrivileges = map[string][]string{
	"user_profiles":                 {"SELECT"},
	"transactions":                  {"SELECT"},
	"user_engagement_states":        {"SELECT", "UPDATE"},
	"engagement_state_transitions":  {"SELECT", "INSERT", "DELETE"},
	"engagement_message_queue":      {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"engagement_processed_messages": {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"engagement_transport_pacing":   {"SELECT", "INSERT", "UPDATE"},
	"engagement_idempotency_keys":   {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"engagement_job_runs":           {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"engagement_queue_holders":      {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"engagement_time_zones":         {"SELECT"},
	"engagement_schema_migrations":  {"SELECT"},
	"engagement_adopted_tables":     {"SELECT"},
	"engagement_fire_requests":      {"SELECT", "DELETE"},
	"engagement_console_audit":      {"SELECT", "INSERT", "UPDATE", "DELETE"},
	// The send budget (queue-process --daily-limit): a claim under it
	// creates and updates its transport's row and stamps the recipients it
	// takes; it deletes those out of the window, a refund those handed back.
	"engagement_send_budgets":           {"SELECT", "INSERT", "UPDATE"},
	"engagement_send_budget_recipients": {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"engagement_send_budget_claims":     {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"engagement_consent_events":         {"SELECT", "DELETE"},
	// Each user's newest wish (migration 68): the consent calls write it.
	"engagement_consent_newest": {"SELECT"},
	// Receipts that came before their send (migration 65): the functions
	// keep and apply them; cleanup deletes those that never matched.
	"engagement_receipt_inbox":   {"SELECT", "DELETE"},
	"engagement_receipt_gate":    {"SELECT"},
	"engagement_number_health":   {"SELECT", "INSERT", "UPDATE"},
	"engagement_template_status": {"SELECT", "INSERT", "UPDATE"},
	// Each template's latest Meta category (migration 74): queue-process
	// records the Message Templates API's, the console the webhook's.
	"engagement_template_categories": {"SELECT", "INSERT", "UPDATE"},
	"engagement_queue_settings":      {"SELECT", "INSERT", "UPDATE"},
	// Every door (migration 69): engagementctl categories declares the
	// category of a message type; erase records who was erased.
	"engagement_message_types": {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"engagement_erasures":      {"SELECT", "INSERT", "UPDATE"},
	// Opt-outs and erasures for the batches in flight (migration 72):
	// erase writes one, queue-process reads them and deletes the old.
	"engagement_wishes": {"SELECT", "INSERT", "DELETE"},
	// Meta's throughput level per Cloud API number (migration 77):
	// queue-process records what it read at start.
	"engagement_number_throughput": {"SELECT", "INSERT", "UPDATE"},
	// Account-wide refusals of a transport (migration 80): queue-process
	// records and reads them; engagementctl pause clear ends one early.
	"engagement_transport_pauses": {"SELECT", "INSERT", "UPDATE"},
}

var tablePrivileges = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"}

// roleSet is one test's three roles and their passwords.
type roleSet struct {
	app, jobs, migrator, bot string
	appPassword              string
	migratorPassword         string
}

// newRoles names a fresh set of roles and drops them (with whatever they
// own or were granted in dbURL's database) when the test ends. Registered
// after the database, the cleanup runs before the database is dropped.
func newRoles(t *testing.T, adminURL string) roleSet {
	t.Helper()
	suffix := randomHex(t, 5)
	rs := roleSet{
		app:              "engagement_app_" + suffix,
		jobs:             "engagement_jobs_" + suffix,
		migrator:         "engagement_migrator_" + suffix,
		bot:              "engagement_bot_" + suffix,
		appPassword:      "app-" + randomHex(t, 8),
		migratorPassword: "mig-" + randomHex(t, 8),
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("drop test roles: connect: %v", err)
			return
		}
		defer conn.Close(ctx)
		names := pgx.Identifier{rs.app}.Sanitize() + ", " + pgx.Identifier{rs.jobs}.Sanitize() + ", " + pgx.Identifier{rs.migrator}.Sanitize() +
			", " + pgx.Identifier{rs.bot}.Sanitize()
		for _, stmt := range []string{
			// Only the roles that exist: a test that failed early may not
			// have created them.
			`DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname IN ('` + rs.app + `','` + rs.jobs + `','` + rs.migrator + `','` + rs.bot + `')) THEN EXECUTE 'DROP OWNED BY ` + strings.ReplaceAll(names, "'", "''") + `'; END IF; END $$`,
			`DROP ROLE IF EXISTS ` + names,
		} {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				t.Errorf("drop test roles: %v", err)
			}
		}
	})
	return rs
}

func (rs roleSet) vars() map[string]string {
	return map[string]string{
		"app_role": rs.app, "jobs_role": rs.jobs, "migrator_role": rs.migrator, "bot_role": rs.bot,
		"app_password": rs.appPassword, "migrator_password": rs.migratorPassword,
	}
}

// applyRoles runs roles.sql on the database at adminURL and returns the
// notices the server raised.
func applyRoles(t *testing.T, adminURL string, vars map[string]string) []string {
	t.Helper()
	root := repoRoot(t)
	script := psqlScript(t, filepath.Join(root, "deploy", "sql", "roles.sql"), vars)
	cfg, err := pgconn.ParseConfig(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		notices []string
	)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Message)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect as the administrator: %v", err)
	}
	defer conn.Close(context.Background())
	// The simple protocol runs the whole script, BEGIN to COMMIT, as psql
	// would statement by statement. The roles are the cluster's: tests
	// granting and dropping roles side by side can deadlock on the shared
	// catalogs (40P01, seen once in a run of ./deploy beside other
	// packages' tests), and PostgreSQL then rolls one script back whole;
	// it is run again, as an operator would.
	for attempt := 1; ; attempt++ {
		_, err := conn.Exec(ctx, script).ReadAll()
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "40P01" && attempt < 3 {
			mu.Lock()
			notices = nil
			mu.Unlock()
			continue
		}
		if err != nil {
			t.Fatalf("roles.sql failed: %v", err)
		}
		break
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(notices)
}

// asRole returns dbURL with its user and password replaced.
func asRole(t *testing.T, dbURL, role, password string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("parse the test database URL: %v", err)
	}
	u.User = url.UserPassword(role, password)
	return u.String()
}

func TestRolesScriptGrantsExactlyWhatTheJobsUse(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	rs := newRoles(t, dbURL)
	applyRoles(t, dbURL, rs.vars())

	ctx := context.Background()
	admin := connect(t, dbURL)

	// Hand one privilege too many, as an operator might: the re-run must
	// take it back, and change nothing else.
	if _, err := admin.Exec(ctx, `GRANT TRUNCATE ON user_profiles TO `+pgx.Identifier{rs.jobs}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if notices := applyRoles(t, dbURL, rs.vars()); len(notices) != 0 {
		t.Errorf("re-running roles.sql on a migrated database raised notices %q, want none", notices)
	}

	got := map[string][]string{}
	owners := map[string]string{}
	for _, p := range fixture.DeployTablePrivileges(t, admin, rs.app, tablePrivileges) {
		owners[p.TableName] = p.Owner
		if _, ok := got[p.TableName]; !ok {
			got[p.TableName] = nil
		}
		if p.Has {
			got[p.TableName] = append(got[p.TableName], p.Privilege)
		}
	}
	for table, privs := range got {
		want, ok := wantPrivileges[table]
		if !ok {
			t.Errorf("table %s (from the migrations) is not in roles.sql's list: say what the jobs may do with it, there and in wantPrivileges", table)
			continue
		}
		slices.Sort(privs)
		want = slices.Sorted(slices.Values(want))
		if !slices.Equal(privs, want) {
			t.Errorf("%s may %v on %s, want exactly %v", rs.app, privs, table, want)
		}
		if owners[table] != rs.migrator {
			t.Errorf("%s is owned by %s, want the migrator %s", table, owners[table], rs.migrator)
		}
	}
	for table := range wantPrivileges {
		if _, ok := got[table]; !ok {
			t.Errorf("roles.sql grants on %s, which the migrations do not create", table)
		}
	}

	powers := fixture.DeployRolePowersOf(t, admin, rs.app, rs.jobs, rs.migrator)
	if !powers.AppLogin || powers.JobsLogin || !powers.MigratorLogin {
		t.Errorf("can log in: app %v, jobs %v, migrator %v; want true, false, true", powers.AppLogin, powers.JobsLogin, powers.MigratorLogin)
	}
	if powers.AnyPowers {
		t.Error("a role has SUPERUSER, CREATEDB, CREATEROLE, REPLICATION or BYPASSRLS; want none of them")
	}
	if !powers.AppInJobs {
		t.Errorf("%s does not use %s's privileges", rs.app, rs.jobs)
	}
	if !powers.MigratorCreates {
		t.Errorf("the migrator %s may not create in schema public", rs.migrator)
	}
	if powers.JobsCreate {
		t.Errorf("%s was granted CREATE on schema public", rs.jobs)
	}

	// Every function of the scheduler's (which the migrations take from
	// PUBLIC) is one the jobs may execute, but the bot's engagement_fire,
	// which only the bot's role may, and engagement_receipt,
	// engagement_opt_out and engagement_opt_in, which both may (the bot
	// forwards acks and hears "stop", the console takes Meta's webhooks):
	// roles.sql's lists name them all, and the migrator owns them.
	functions := fixture.DeployFunctionPrivileges(t, admin, rs.app, rs.bot, rs.migrator)
	for _, fn := range functions {
		if !fn.May || !fn.Owned {
			t.Errorf("function %s: executable by exactly the right roles (%s; %s for engagement_fire, both for receipts and consent) %v, the migrator owns it %v; want both (list it in roles.sql's funcs or bot_funcs)", fn.Signature, rs.app, rs.bot, fn.May, fn.Owned)
		}
	}
	if len(functions) == 0 {
		t.Error("no function of the scheduler's found: the query is broken")
	}
}

func TestJobsRunAsTheLeastPrivilegeRole(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	rs := newRoles(t, dbURL)
	applyRoles(t, dbURL, rs.vars())
	admin := connect(t, dbURL)
	appURL := asRole(t, dbURL, rs.app, rs.appPassword)
	env := cmdtest.Env("DATABASE_URL=" + appURL)

	// One user for each kind of work: a goodbye (daily), an expired goodbye
	// (daily, no message), a weekly review (weekly), a queued message
	// (enqueue); queue-process delivers, cleanup deletes, status and
	// verify read.
	now := time.Now()
	inactive := fixture.User(t, admin, fixture.UserOptions{LastActivity: now.Add(-30 * 24 * time.Hour)})
	expired := fixture.User(t, admin, fixture.UserOptions{State: "goodbye_sent", LastActivity: now.Add(-20 * 24 * time.Hour),
		GoodbyeSentAt: fixture.Ptr(now.Add(-72 * time.Hour)), GoodbyeExpiresAt: fixture.Ptr(now.Add(-24 * time.Hour))})
	weekly := fixture.User(t, admin, fixture.UserOptions{LastActivity: now.Add(-time.Hour)})
	fixture.Transactions(t, admin, weekly, now.Add(-2*time.Hour), now.Add(-26*time.Hour))

	daily, weeklyJob, queue, ctl := jobcmd.NewDailyCommand, jobcmd.NewWeeklyCommand, queuecmd.NewCommand, ctl.NewCommand

	run := func(newCmd func() *cobra.Command, args ...string) map[string]any {
		t.Helper()
		res := cmdtest.Exec(t, newCmd, env, args...)
		bin := newCmd().Name()
		if res.Code != 0 {
			t.Fatalf("%s %v as %s: exit %d, want 0\nstdout: %s\nstderr: %s", bin, args, rs.app, res.Code, res.Stdout, res.Stderr)
		}
		if strings.Contains(res.Stdout+res.Stderr, rs.appPassword) {
			t.Errorf("%s %v printed the role's password", bin, args)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
			t.Fatalf("%s %v: stdout is not one JSON object: %v\n%s", bin, args, err, res.Stdout)
		}
		return out
	}
	wantNumber := func(what string, summary map[string]any, key string, want float64) {
		t.Helper()
		if got, _ := summary[key].(float64); got != want {
			t.Errorf("%s: %s = %v, want %v (summary %v)", what, key, summary[key], want, summary)
		}
	}

	// The dry runs and the console's forecast, as the same role: the
	// steps' own statements with their writes switched off, in a
	// read-write transaction rolled back. They count what the runs below do.
	dry := run(daily, "--dry-run", "--output", "json")
	wantNumber("engagement-daily --dry-run", dry, "succeeded", 2)
	wantNumber("engagement-daily --dry-run", dry, "queued", 1)
	wantNumber("engagement-weekly --dry-run", run(weeklyJob, "--dry-run", "--output", "json"), "queued", 1)
	func() {
		ctx := context.Background()
		tx, err := connect(t, appURL).BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // a dry run's transaction is always rolled back
		steps, err := scheduler.ForecastDaily(ctx, tx, now.Add(24*time.Hour), sm.Default)
		if err != nil || len(steps) == 0 || steps[0].Succeeded != 1 {
			t.Errorf("the console's forecast as %s: %+v, %v; want the inactive user's goodbye", rs.app, steps, err)
		}
	}()

	sum := run(daily, "--output", "json")
	wantNumber("engagement-daily", sum, "succeeded", 2)
	wantNumber("engagement-daily", sum, "queued", 1)
	if got := fixture.StateOf(t, admin, inactive).State; got != "goodbye_sent" {
		t.Errorf("inactive user's state after the daily job = %q, want goodbye_sent", got)
	}
	if got := fixture.StateOf(t, admin, expired).State; got != "dormant" {
		t.Errorf("expired goodbye's state after the daily job = %q, want dormant", got)
	}

	sum = run(weeklyJob, "--output", "json")
	wantNumber("engagement-weekly", sum, "queued", 1)

	enq := run(ctl, "enqueue", "--user-id", weekly, "--type", "receipt", "--key", "engagement.weekly_review.celebration",
		"--params", `{"count":"1"}`, "--idempotency-key", weekly+":roles-test", "--output", "json")
	if enq["created"] != true {
		t.Errorf("enqueue: %v, want created true", enq)
	}

	// Under a send budget, as every shipped configuration runs it: the
	// claims lock, prune and stamp the budget's tables as this role.
	sum = run(queue, "--transport", "log", "--send-interval", "1ms", "--dedupe-store", "postgres",
		"--daily-limit", "100", "--daily-limit-ramp", "50,1.5", "--output", "json")
	wantNumber("queue-process", sum, "sent", 3)
	wantNumber("queue-process", sum, "failed", 0)
	wantNumber("queue-process", sum, "deferred", 0)
	sentTo := map[string]bool{}
	for _, m := range fixture.MessageRows(t, admin, fixture.Messages{Status: "sent"}) {
		sentTo[m.DestinationJID] = true
	}
	recipients := len(sentTo)
	if budget, _ := sum["budget"].(map[string]any); budget == nil {
		t.Errorf("queue-process --daily-limit: no budget in the summary %v", sum)
	} else {
		wantNumber("queue-process's budget", budget, "limit", 50)
		wantNumber("queue-process's budget", budget, "used", float64(recipients))
	}
	if n := fixture.DeployCountPacing(t, admin); n != 1 {
		t.Errorf("pacing rows after queue-process = %d, want 1", n)
	}
	if n := fixture.CountIdempotencyKeys(t, admin); n != 3 {
		t.Errorf("dedupe keys after queue-process = %d, want 3", n)
	}

	if budgets, _ := run(ctl, "status", "--output", "json")["budgets"].([]any); len(budgets) != 1 {
		t.Errorf("engagementctl status as %s: budgets %v, want the log transport's", rs.app, budgets)
	}
	if res := cmdtest.Exec(t, ctl, env, "verify"); res.Code != 0 {
		t.Errorf("engagementctl verify as %s: exit %d, want 0\n%s%s", rs.app, res.Code, res.Stdout, res.Stderr)
	}

	// Far enough ahead that every message's key is past the retention and
	// every dedupe key has expired.
	later := now.Add(90 * 24 * time.Hour).UTC().Format(time.RFC3339)
	sum = run(ctl, "cleanup", "--older-than", "720h", "--as-of", later, "--output", "json")
	wantNumber("cleanup", sum, "messages", 3)
	wantNumber("cleanup", sum, "ledger", 3)
	wantNumber("cleanup", sum, "idempotency_keys", 3)

	// An operator's consent and erase (issue 44), with an audit row naming
	// the user for erase to scrub and the transition log's horizon.
	fixture.DeployUserAudit(t, admin, "ana", "cancel", inactive, 1)
	if out := run(ctl, "opt-out", "--user-id", weekly, "--output", "json"); out["changed"] != true {
		t.Errorf("opt-out as %s: %v, want changed", rs.app, out)
	}
	wantNumber("erase", run(ctl, "erase", "--user-id", inactive, "--yes", "--output", "json"), "console_audit", 1)
	run(ctl, "cleanup", "--transitions-older-than", "2880h", "--consent-older-than", "24h", "--audit-older-than", "8760h",
		"--runs-older-than", "168h", "--as-of", later, "--output", "json")

	// What the role must not do, each refused by the server for lack of
	// privilege (SQLSTATE 42501), not by some other error.
	app := connect(t, appURL)
	for _, stmt := range []string{
		`DROP TABLE engagement_message_queue`,
		`ALTER TABLE user_engagement_states ADD COLUMN x integer`,
		`TRUNCATE engagement_state_transitions`,
		`TRUNCATE engagement_message_queue`,
		`UPDATE user_profiles SET locale = 'en'`,
		`INSERT INTO user_profiles (user_id) VALUES (gen_random_uuid())`,
		`INSERT INTO transactions (user_id, created_at) VALUES (gen_random_uuid(), now())`,
		`UPDATE engagement_state_transitions SET trigger = 'x'`,
		`DELETE FROM user_engagement_states`,
		`DELETE FROM engagement_time_zones`,
		`UPDATE engagement_schema_migrations SET dirty = true`,
		`CREATE INDEX ON engagement_message_queue (user_id)`,
		`CREATE TRIGGER t BEFORE INSERT ON engagement_message_queue FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()`,
	} {
		_, err := app.Exec(context.Background(), stmt)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("as %s, %s: error %v, want permission denied (42501)", rs.app, stmt, err)
		}
	}
	if n := fixture.CountTransitions(t, admin, fixture.Moves{}); n != 2 {
		t.Errorf("transitions after the refused statements = %d, want the daily job's 2", n)
	}
}

func TestMigrationsNeedTheMigrator(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	rs := newRoles(t, dbURL)
	applyRoles(t, dbURL, rs.vars())
	admin := connect(t, dbURL)
	ctl := ctl.NewCommand
	appEnv := cmdtest.Env("DATABASE_URL=" + asRole(t, dbURL, rs.app, rs.appPassword))
	migEnv := cmdtest.Env("DATABASE_URL=" + asRole(t, dbURL, rs.migrator, rs.migratorPassword))
	latest, _ := fixture.SchemaVersion(t, admin)

	wantVersion := func(when string, want int) {
		t.Helper()
		version, dirty := fixture.SchemaVersion(t, admin)
		if version != want || dirty {
			t.Errorf("%s: schema version %d (dirty %v), want %d, clean", when, version, dirty, want)
		}
	}
	step := func(env []string, who string, wantCode int, args ...string) {
		t.Helper()
		res := cmdtest.Exec(t, ctl, env, args...)
		if res.Code != wantCode {
			t.Fatalf("engagementctl %v as %s: exit %d, want %d\n%s%s", args, who, res.Code, wantCode, res.Stdout, res.Stderr)
		}
		if wantCode != 0 && !strings.Contains(res.Stderr, "permission denied") && !strings.Contains(res.Stderr, "must be owner") {
			t.Errorf("engagementctl %v as %s failed, but not for lack of privilege:\n%s", args, who, res.Stderr)
		}
	}

	step(appEnv, rs.app, 1, "migrate", "down", "1")
	wantVersion("after the jobs' role tried to migrate down", latest)
	step(migEnv, rs.migrator, 0, "migrate", "down", "1")
	previous := previousMigration(t, latest)
	wantVersion("after the migrator migrated down", previous)
	step(appEnv, rs.app, 1, "migrate", "up")
	wantVersion("after the jobs' role tried to migrate up", previous)
	step(migEnv, rs.migrator, 0, "migrate", "up")
	wantVersion("after the migrator migrated up", latest)
	// A release whose migrations add a table needs roles.sql again
	// (docs/deploy.md, "Database roles"), and the latest may add one: the
	// migrator's new objects then change nothing the jobs can do.
	applyRoles(t, dbURL, rs.vars())
	if res := cmdtest.Exec(t, ctl, appEnv, "status", "--output", "json"); res.Code != 0 {
		t.Errorf("status as %s after the migrations: exit %d\n%s", rs.app, res.Code, res.Stderr)
	}
}

// previousMigration is the highest migration version below latest among
// the files in migrations/ (numbers may have gaps: they are reserved ahead).
func previousMigration(t *testing.T, latest int) int {
	t.Helper()
	files, err := filepath.Glob("../migrations/*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	previous := 0
	for _, f := range files {
		prefix, _, _ := strings.Cut(filepath.Base(f), "_")
		if v, err := strconv.Atoi(prefix); err == nil && v < latest && v > previous {
			previous = v
		}
	}
	return previous
}

func TestRolesScriptOnAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewEmptyDatabase(t)
	rs := newRoles(t, dbURL)
	ctl := ctl.NewCommand

	// First run: the roles, and a notice naming every table still missing.
	notices := applyRoles(t, dbURL, rs.vars())
	if len(notices) != 1 || !strings.Contains(notices[0], "migrate up") {
		t.Fatalf("roles.sql on an empty database: notices %q, want one telling to run migrate up", notices)
	}
	for table := range wantPrivileges {
		if !strings.Contains(notices[0], table) {
			t.Errorf("the notice %q does not name the missing table %s", notices[0], table)
		}
	}

	// The migrator creates the schema; the jobs cannot use it yet...
	migEnv := cmdtest.Env("DATABASE_URL=" + asRole(t, dbURL, rs.migrator, rs.migratorPassword))
	if res := cmdtest.Exec(t, ctl, migEnv, "migrate", "up"); res.Code != 0 {
		t.Fatalf("migrate up as the migrator on an empty database: exit %d\n%s", res.Code, res.Stderr)
	}
	appEnv := cmdtest.Env("DATABASE_URL=" + asRole(t, dbURL, rs.app, rs.appPassword))
	if res := cmdtest.Exec(t, ctl, appEnv, "status"); res.Code != 1 || !strings.Contains(res.Stderr, "permission denied") {
		t.Errorf("status as %s before the second run of roles.sql: exit %d, want 1 with permission denied\n%s", rs.app, res.Code, res.Stderr)
	}
	// ...until the script runs again.
	if notices := applyRoles(t, dbURL, rs.vars()); len(notices) != 0 {
		t.Errorf("second run of roles.sql: notices %q, want none", notices)
	}
	if res := cmdtest.Exec(t, ctl, appEnv, "status"); res.Code != 0 {
		t.Errorf("status as %s after the second run of roles.sql: exit %d\n%s", rs.app, res.Code, res.Stderr)
	}
}

// TestRolesScriptRejectsBadNames: the script stops, changing nothing, when
// two roles would be the same role.
func TestRolesScriptRejectsBadNames(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewEmptyDatabase(t)
	rs := newRoles(t, dbURL)
	vars := rs.vars()
	vars["jobs_role"] = rs.app
	script := psqlScript(t, filepath.Join(repoRoot(t), "deploy", "sql", "roles.sql"), vars)
	_, err := connect(t, dbURL).PgConn().Exec(context.Background(), script).ReadAll()
	if err == nil || !strings.Contains(err.Error(), "four different") {
		t.Fatalf("roles.sql with app_role = jobs_role: error %v, want one saying the names must differ", err)
	}
	if fixture.RoleExists(t, connect(t, dbURL), rs.app) {
		t.Errorf("the failed script left role %s behind", rs.app)
	}
}

func connect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// psqlScript reads a psql script and returns the SQL psql would send: the
// meta-commands roles.sql uses (\set NAME VALUE, \if :{?NAME}, \else,
// \endif) interpreted, -v variables from vars, and :'NAME' / :"NAME" /
// :NAME replaced outside quotes, dollar quotes and comments. Anything else
// psql-only fails the test, so the script cannot drift away from what this
// test runs.
func psqlScript(t *testing.T, path string, vars map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]string{}
	for k, val := range vars {
		v[k] = val
	}
	var (
		out    strings.Builder
		active = []bool{true} // one per open \if; the top is "this line runs"
	)
	running := func() bool { return !slices.Contains(active, false) }
	ifSet := regexp.MustCompile(`^\\if\s+:\{\?(\w+)\}\s*$`)
	setVar := regexp.MustCompile(`^\\set\s+(\w+)\s+(\S+)\s*$`)
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, `\`) {
			if running() {
				out.WriteString(line)
				out.WriteByte('\n')
			}
			continue
		}
		switch m, s := ifSet.FindStringSubmatch(trimmed), setVar.FindStringSubmatch(trimmed); {
		case m != nil:
			_, ok := v[m[1]]
			active = append(active, ok)
		case trimmed == `\else`:
			if len(active) < 2 {
				t.Fatalf("%s:%d: \\else without \\if", path, i+1)
			}
			active[len(active)-1] = !active[len(active)-1]
		case trimmed == `\endif`:
			if len(active) < 2 {
				t.Fatalf("%s:%d: \\endif without \\if", path, i+1)
			}
			active = active[:len(active)-1]
		case s != nil:
			if running() {
				val := s[2]
				if val == "''" {
					val = ""
				}
				v[s[1]] = val
			}
		default:
			t.Fatalf("%s:%d: psql meta-command %q is not one the tests know how to run", path, i+1, trimmed)
		}
	}
	if len(active) != 1 {
		t.Fatalf("%s: \\if without \\endif", path)
	}
	return substituteVars(t, path, out.String(), v)
}

func substituteVars(t *testing.T, path, sql string, v map[string]string) string {
	t.Helper()
	var out strings.Builder
	lookup := func(name string) string {
		val, ok := v[name]
		if !ok {
			t.Fatalf("%s: variable %q is used but never set", path, name)
		}
		return val
	}
	isName := func(c byte) bool {
		return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	dollarTag := regexp.MustCompile(`^\$(\w*)\$`)
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case strings.HasPrefix(sql[i:], "--"):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				end = len(sql) - i
			}
			out.WriteString(sql[i : i+end])
			i += end
		case c == '\'' || c == '"':
			end := strings.IndexByte(sql[i+1:], c)
			if end < 0 {
				t.Fatalf("%s: unterminated %c quote", path, c)
			}
			out.WriteString(sql[i : i+end+2])
			i += end + 2
		case c == '$' && dollarTag.MatchString(sql[i:]):
			tag := dollarTag.FindString(sql[i:])
			end := strings.Index(sql[i+len(tag):], tag)
			if end < 0 {
				t.Fatalf("%s: unterminated dollar quote %s", path, tag)
			}
			out.WriteString(sql[i : i+len(tag)+end+len(tag)])
			i += len(tag) + end + len(tag)
		case strings.HasPrefix(sql[i:], "::"):
			out.WriteString("::")
			i += 2
		case c == ':' && i+1 < len(sql) && (sql[i+1] == '\'' || sql[i+1] == '"'):
			q := sql[i+1]
			end := strings.IndexByte(sql[i+2:], q)
			if end < 0 {
				t.Fatalf("%s: unterminated :%c variable", path, q)
			}
			val := lookup(sql[i+2 : i+2+end])
			if q == '\'' {
				out.WriteString("'" + strings.ReplaceAll(val, "'", "''") + "'")
			} else {
				out.WriteString(pgx.Identifier{val}.Sanitize())
			}
			i += end + 3
		case c == ':' && i+1 < len(sql) && isName(sql[i+1]):
			j := i + 1
			for j < len(sql) && isName(sql[j]) {
				j++
			}
			out.WriteString(lookup(sql[i+1 : j]))
			i = j
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String()
}

// TestRolesScriptOnTheBotsDatabase: on the bot's Supabase database, whose
// tables have row level security on (and the scheduler's too, since
// migration 28), the least-privilege role of roles.sql does the jobs'
// work: it reads the bot's users through its policies, moves them, queues
// and delivers. No table changes owner (the bot's stay the bot's), no
// policy lets anon or authenticated in, and row level security stays on.
func TestRolesScriptOnTheBotsDatabase(t *testing.T) {
	t.Parallel()
	asOf := time.Now().UTC().Truncate(time.Second)
	dbURL := botdb.NewDatabaseWithRows(t, asOf)
	if res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+dbURL), "migrate", "up"); res.Code != 0 {
		t.Fatalf("migrate up: exit %d: %s", res.Code, res.Stderr)
	}
	admin := connect(t, dbURL)
	before := fixture.DeployTableOwners(t, admin)
	rs := newRoles(t, dbURL)
	notices := applyRoles(t, dbURL, rs.vars())
	if !slices.ContainsFunc(notices, func(n string) bool { return strings.Contains(n, "every table keeps its owner") }) {
		t.Errorf("roles.sql on the bot's database said %q, want a notice that every table keeps its owner", notices)
	}
	if after := fixture.DeployTableOwners(t, admin); after != before {
		t.Errorf("roles.sql changed owners or row level security:\nbefore %s\nafter  %s", before, after)
	}

	env := cmdtest.Env("DATABASE_URL=" + asRole(t, dbURL, rs.app, rs.appPassword))
	run := func(newCmd func() *cobra.Command, args ...string) map[string]any {
		t.Helper()
		res := cmdtest.Exec(t, newCmd, env, append(args, "--output", "json")...)
		var out map[string]any
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &out) != nil {
			t.Fatalf("%s %v as %s: exit %d\n%s\n%s", newCmd().Name(), args, rs.app, res.Code, res.Stdout, res.Stderr)
		}
		return out
	}
	if sum := run(jobcmd.NewDailyCommand, "--skip-send"); sum["queued"] != float64(3) {
		t.Errorf("engagement-daily as %s on the bot's database: %v, want 3 goodbyes queued", rs.app, sum)
	}
	if sum := run(jobcmd.NewWeeklyCommand, "--skip-send"); sum["queued"] != float64(2) {
		t.Errorf("engagement-weekly as %s: %v, want 2 reviews queued", rs.app, sum)
	}
	if sum := run(queuecmd.NewCommand, "--transport", "log", "--send-interval", "0"); sum["sent"] != float64(6) {
		t.Errorf("queue-process as %s: %v, want 6 sent", rs.app, sum)
	}
	run(ctl.NewCommand, "verify")
	run(ctl.NewCommand, "status")
	if state := fixture.StateOf(t, admin, botdb.Silent20Days).State; state != "goodbye_sent" {
		t.Errorf("the bot's silent user is %q after the jobs ran as %s, want goodbye_sent", state, rs.app)
	}
	if open := fixture.OpenPolicies(t, admin); open != 0 {
		t.Errorf("policies for anon, authenticated or PUBLIC: %d, want none", open)
	}
}
