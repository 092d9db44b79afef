package main_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
)

func tableExists(t *testing.T, url, table string) bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	return exists
}

func TestMigrateUpDownVersion(t *testing.T) {
	t.Parallel()
	bin := cmdtest.Build(t, "./cmd/engagementctl")
	url := pgtest.NewEmptyDatabase(t)
	env := cmdtest.Env("DATABASE_URL=" + url)
	latest := "schema version " + itoa(migrations.Latest) + " of " + itoa(migrations.Latest)
	oneBack := "schema version " + itoa(migrations.Latest-1) + " of " + itoa(migrations.Latest)

	steps := []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantTable  bool
	}{
		{[]string{"migrate", "version"}, 0, "schema version 0 of", false},
		{[]string{"migrate", "up"}, 0, latest, true},
		{[]string{"migrate", "up"}, 0, latest, true}, // up to date: a no-op
		{[]string{"migrate", "version"}, 0, latest, true},
		{[]string{"migrate", "down"}, 0, oneBack, migrations.Latest > 1},
		{[]string{"migrate", "down", itoa(migrations.Latest)}, 0, "schema version 0 of", false}, // more than left: all of them
		{[]string{"migrate", "down"}, 0, "schema version 0 of", false},                          // nothing left: a no-op
		{[]string{"migrate", "up"}, 0, latest, true},
		{[]string{"migrate", "down", "--all"}, 0, "schema version 0 of", false},
		{[]string{"migrate", "up"}, 0, latest, true},
	}
	for _, s := range steps {
		res := cmdtest.Run(t, bin, env, s.args...)
		if res.Code != s.wantCode || !strings.Contains(res.Stdout, s.wantStdout) {
			t.Fatalf("engagementctl %s: exit %d stdout %q stderr %q; want exit %d and %q",
				strings.Join(s.args, " "), res.Code, res.Stdout, res.Stderr, s.wantCode, s.wantStdout)
		}
		if got := tableExists(t, url, "user_engagement_states"); got != s.wantTable {
			t.Fatalf("after engagementctl %s: user_engagement_states exists = %v, want %v", strings.Join(s.args, " "), got, s.wantTable)
		}
	}
}

func TestCtlUsageErrors(t *testing.T) {
	t.Parallel()
	bin := cmdtest.Build(t, "./cmd/engagementctl")
	url := pgtest.NewEmptyDatabase(t)
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no database", nil, []string{"migrate", "up"}, "DATABASE_URL"},
		{"bad step count", []string{"DATABASE_URL=" + url}, []string{"migrate", "down", "two"}, "positive number"},
		{"unknown command", []string{"DATABASE_URL=" + url}, []string{"migrate", "sideways"}, "unknown command"},
		{"unknown flag", []string{"DATABASE_URL=" + url}, []string{"migrate", "up", "--force"}, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := cmdtest.Run(t, bin, cmdtest.Env(tt.env...), tt.args...)
			if res.Code != 2 || !strings.Contains(res.Stderr, tt.want) || len(cmdtest.Lines(res.Stderr)) != 1 {
				t.Errorf("exit %d stderr %q; want exit 2 and one line mentioning %q", res.Code, res.Stderr, tt.want)
			}
		})
	}
	if tableExists(t, url, "user_engagement_states") {
		t.Error("a rejected command changed the schema")
	}
}

func itoa(v uint) string { return strconv.FormatUint(uint64(v), 10) }
