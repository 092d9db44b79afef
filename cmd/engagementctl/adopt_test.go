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
	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/migrations"
)

// relations lists the database's tables and indexes, to show a command
// created none.
func relations(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	return fixture.CtlRelations(t, conn)
}

// TestMigrateCheckReviewsTheBotsDatabase: before the first deploy the bot
// team reviews what `migrate up` would do to its database: the tables it
// adopts (with their rows and what it adds), and every migration; nothing
// is changed, and the exit code says whether up would run.
func TestMigrateCheckReviewsTheBotsDatabase(t *testing.T) {
	t.Parallel()
	url := botdb.NewDatabaseWithRows(t, time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	env := cmdtest.Env("DATABASE_URL=" + url)
	before := relations(t, url)

	res := cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "check")
	if res.Code != 0 {
		t.Fatalf("migrate check: exit %d, stderr %q", res.Code, res.Stderr)
	}
	for _, want := range []string{
		"schema version 0 of ",
		"user_profiles (12 rows): adds nullable group_jid text, timezone text",
		"engagement_message_queue (4 rows): adds nullable claimed_until",
		"CREATE TABLE IF NOT EXISTS user_engagement_states (   -- exists: the bot's, kept as it is",
		"28 closed_to_data_api: Nothing the scheduler creates is reachable through Supabase's Data API.",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("migrate check's output does not say %q:\n%s", want, res.Stdout)
		}
	}
	if after := relations(t, url); after != before {
		t.Errorf("migrate check changed the database: relations %q, were %q", after, before)
	}

	res = cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "check", "--output", "json")
	var in migrations.Inspection
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &in) != nil || len(in.Adopted) != 4 || len(in.Pending) != len(migrations.Versions()) {
		t.Errorf("migrate check --output json: exit %d, %d adopted, %d pending; stdout %q", res.Code, len(in.Adopted), len(in.Pending), res.Stdout)
	}

	// Once up has run, nothing is left to do.
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "up"); res.Code != 0 {
		t.Fatalf("migrate up: exit %d, stderr %q", res.Code, res.Stderr)
	}
	res = cmdtest.Exec(t, ctl.NewCommand, env, "migrate", "check")
	if res.Code != 0 || !strings.HasPrefix(res.Stdout, "schema version "+strconv.FormatUint(uint64(migrations.Latest), 10)+" of "+strconv.FormatUint(uint64(migrations.Latest), 10)+": 0 migration(s) to apply") {
		t.Errorf("migrate check after up: exit %d, stdout %q", res.Code, res.Stdout)
	}
}

// TestMigrateRefusesAnIncompatibleBotTable: a bot table whose
// last_activity_at is text makes `migrate check` and `migrate up` exit 1,
// naming table, column, what it is and what is needed, and up changes
// nothing.
func TestMigrateRefusesAnIncompatibleBotTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := botdb.NewDatabaseWithRows(t, time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	fixture.BotLastActivityAsText(t, conn)
	conn.Close(ctx)
	env := cmdtest.Env("DATABASE_URL=" + url)
	before := relations(t, url)
	const want = "user_engagement_states.last_activity_at: of type text; the scheduler needs type timestamp with time zone"
	for _, args := range [][]string{{"migrate", "check"}, {"migrate", "up"}} {
		res := cmdtest.Exec(t, ctl.NewCommand, env, args...)
		if res.Code != 1 || !strings.Contains(res.Stdout+res.Stderr, want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 naming %q", args, res.Code, res.Stdout, res.Stderr, want)
		}
		if lines := cmdtest.Lines(res.Stderr); len(lines) != 1 {
			t.Errorf("%v: stderr has %d lines, want the one error line: %q", args, len(lines), res.Stderr)
		}
	}
	if after := relations(t, url); after != before {
		t.Errorf("a refused migrate up changed the database: relations %q, were %q", after, before)
	}
}
