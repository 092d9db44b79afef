package main_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// smokeJSON is the part of engagementctl smoke --output json the tests read.
type smokeJSON struct {
	Job           string `json:"job"`
	OK            bool   `json:"ok"`
	Failure       string `json:"failure"`
	Users         int    `json:"users"`
	SchemaVersion int    `json:"schema_version"`
	Expectations  int    `json:"expectations"`
	Runs          map[string]struct {
		Job        string `json:"job"`
		Processed  int    `json:"processed"`
		Queued     int    `json:"queued"`
		Duplicates int    `json:"duplicates"`
		Sent       int    `json:"sent"`
	} `json:"runs"`
	Verify *struct {
		OK     bool     `json:"ok"`
		Broken []string `json:"broken"`
	} `json:"verify"`
	Queue map[string]int `json:"queue"`
}

func parseSmoke(t *testing.T, res cmdtest.Result) smokeJSON {
	t.Helper()
	var s smokeJSON
	dec := json.NewDecoder(strings.NewReader(res.Stdout))
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, res.Stdout)
	}
	if dec.More() {
		t.Fatalf("stdout carries more than one JSON object:\n%s", res.Stdout)
	}
	return s
}

// dbFingerprint sums up everything smoke could write, to show a refusal
// wrote nothing: every table of the database with its row count, and the
// schema version.
func dbFingerprint(t *testing.T, dbURL string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	fp := fixture.CtlFingerprint(t, conn)
	var version string
	if fixture.TableExists(t, conn, "engagement_schema_migrations") {
		if v, dirty, recorded := fixture.CtlSchemaVersion(t, conn); recorded {
			version = strconv.Itoa(v)
			if dirty {
				version += " dirty"
			}
		}
	}
	return fp + "; schema " + version
}

func TestSmokePassesOnAnEmptyDatabaseAndRefusesOneWithUsers(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewEmptyDatabase(t)
	env := cmdtest.Env("DATABASE_URL=" + dbURL)

	start := time.Now()
	res := cmdtest.Exec(t, ctl.NewCommand, env, "smoke", "--output", "json")
	took := time.Since(start)
	if res.Code != 0 {
		t.Fatalf("smoke on an empty database: exit %d, want 0\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	if strings.TrimSpace(res.Stderr) != "" {
		t.Errorf("a passing smoke run wrote to stderr (logs are at warn by default):\n%s", res.Stderr)
	}
	s := parseSmoke(t, res)
	if s.Job != "smoke" || !s.OK || s.Failure != "" || s.Users != 200 || s.SchemaVersion == 0 || s.Expectations < 10 {
		t.Errorf("summary %+v, want ok with 200 users, a schema version and every expectation counted", s)
	}
	d, w, q := s.Runs["daily"], s.Runs["weekly"], s.Runs["queue_process"]
	if d.Job != "engagement-daily" || w.Job != "engagement-weekly" || q.Job != "queue-process" || d.Queued == 0 || w.Queued == 0 || q.Sent != d.Queued+w.Queued {
		t.Errorf("first runs: daily %+v, weekly %+v, queue %+v; want goodbyes and reviews queued, and all of them sent", d, w, q)
	}
	da, wa, qa := s.Runs["daily_again"], s.Runs["weekly_again"], s.Runs["queue_process_again"]
	if da.Processed != 0 || da.Queued != 0 || wa.Queued != 0 || wa.Duplicates != w.Queued || qa.Processed != 0 {
		t.Errorf("re-runs: daily %+v, weekly %+v, queue %+v; want nothing new", da, wa, qa)
	}
	if s.Verify == nil || !s.Verify.OK || s.Queue["sent"] != q.Sent {
		t.Errorf("verify %+v, queue %v; want verify ok and every message sent", s.Verify, s.Queue)
	}
	t.Logf("smoke took %s", took)

	// The same database now holds users: smoke refuses it, exit 2, and
	// writes nothing (not even a run record).
	before := dbFingerprint(t, dbURL)
	again := cmdtest.Exec(t, ctl.NewCommand, env, "smoke", "--output", "json")
	var refused struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	if again.Code != 2 || !strings.Contains(again.Stderr, "already holds 200 users") ||
		json.Unmarshal([]byte(again.Stdout), &refused) != nil || refused.ExitCode != 2 || !strings.Contains(refused.Error, "already holds 200 users") {
		t.Fatalf("smoke on a database with users: exit %d, stdout %q, stderr %q; want exit 2 saying it holds 200 users, on stderr and in the JSON object on stdout",
			again.Code, again.Stdout, again.Stderr)
	}
	if lines := cmdtest.Lines(again.Stderr); len(lines) != 1 {
		t.Errorf("the refusal is %d lines, want one:\n%s", len(lines), again.Stderr)
	}
	if after := dbFingerprint(t, dbURL); after != before {
		t.Errorf("the refused run wrote: before %s, after %s", before, after)
	}
}

// A database that holds users the operator put there (a real one, say)
// is refused before anything is written, migrations included.
func TestSmokeRefusesADatabaseWithUsers(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.NewPool(t)
	fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	// Make the schema look one version behind, so a migration would show.
	fixture.CtlSchemaBehind(t, pool)
	before := dbFingerprint(t, dbURL)
	res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env(), "smoke", "--database-url", dbURL)
	if res.Code != 2 || !strings.Contains(res.Stderr, "already holds 1 users") {
		t.Fatalf("exit %d, stderr %q; want exit 2 saying the database holds 1 user", res.Code, res.Stderr)
	}
	if after := dbFingerprint(t, dbURL); after != before {
		t.Errorf("the refused run wrote: before %s, after %s", before, after)
	}
	if n := fixture.CountRuns(t, pool, fixture.Runs{}); n != 0 {
		t.Errorf("%d job runs recorded by a refused smoke run", n)
	}

	for _, args := range [][]string{{"--users", "5"}, {"--as-of", "yesterday"}, {"--output", "yaml"}} {
		res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env(), append([]string{"smoke", "--database-url", dbURL}, args...)...)
		if res.Code != 2 || len(cmdtest.Lines(res.Stderr)) != 1 {
			t.Errorf("smoke %v: exit %d, stderr %q; want exit 2 with one line", args, res.Code, res.Stderr)
		}
	}
}

// A job that misbehaves fails the smoke run with one line naming the first
// broken expectation. The misbehaviour is real: a database trigger drops
// the weekly reviews' idempotency keys, so a re-run of the same week queues
// every review again.
func TestSmokeNamesTheFirstBrokenExpectation(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.NewPool(t) // migrated, no users: smoke accepts it
	fixture.CtlDropReviewKeys(t, pool)
	for _, format := range []string{"json", "text"} {
		if format == "text" {
			// A second run needs an empty database again.
			fixture.CtlEmptyUsers(t, pool)
		}
		res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+dbURL), "smoke", "--output", format)
		if res.Code != 1 {
			t.Fatalf("smoke --output %s with a misbehaving weekly job: exit %d, want 1\n%s%s", format, res.Code, res.Stdout, res.Stderr)
		}
		lines := cmdtest.Lines(res.Stderr)
		if len(lines) != 1 || !strings.HasPrefix(cmdtest.Message(lines[0]), "engagementctl: smoke: weekly_again: a re-run of the same week queued ") {
			t.Fatalf("stderr %q, want one line naming weekly_again", res.Stderr)
		}
		if format == "json" {
			s := parseSmoke(t, res)
			if s.OK || !strings.HasPrefix(s.Failure, "smoke: weekly_again:") || s.Runs["weekly_again"].Queued == 0 {
				t.Errorf("summary ok %v, failure %q, weekly_again %+v; want not ok, the failure named, the duplicate reviews counted",
					s.OK, s.Failure, s.Runs["weekly_again"])
			}
		} else if !strings.Contains(res.Stdout, "FAILED") || !strings.Contains(res.Stdout, "weekly_again") {
			t.Errorf("text summary %q, want FAILED naming weekly_again", res.Stdout)
		}
	}
}
