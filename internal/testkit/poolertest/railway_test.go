package poolertest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 24, point 1: the first Railway deploy on Supabase failed at the
// pre-deploy `engagementctl migrate up`, run with the service's
// DATABASE_URL: Supabase's transaction pooler (port 6543), which migrate
// refuses. Following docs/deploy.md ("Railway with Supabase"), each service
// gets DATABASE_URL = the transaction pooler and MIGRATE_DATABASE_URL = the
// session pooler (port 5432). Here a PgBouncer in each mode stands in for
// Supabase's, and every shipped Railway file's exact pre-deploy and start
// commands run against them, in the order Railway would, on a database
// that starts empty.
func TestTheShippedRailwayFilesDeployOnSupabasesPoolers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	empty := pgtest.NewEmptyDatabase(t)
	srv, err := pgtest.ServerURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	transaction := pgtest.NewBouncerFor(t, srv, pgtest.TransactionMode).URL(t, empty)
	session := pgtest.NewBouncerFor(t, srv, pgtest.SessionMode).URL(t, empty)
	env := cmdtest.Env("DATABASE_URL="+transaction, "MIGRATE_DATABASE_URL="+session,
		"ENGAGEMENT_TRANSPORT=log") // queue-process's transport, a service variable

	dir := filepath.Join("..", "..", "..", "deploy", "railway")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) < 4 {
		t.Fatalf("deploy/railway/*.json: %v, %d files", err, len(files))
	}
	type service struct {
		name             string
		preDeploy, start []string
	}
	var services []service
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Deploy struct {
				StartCommand     string   `json:"startCommand"`
				PreDeployCommand []string `json:"preDeployCommand"`
			} `json:"deploy"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		s := service{name: filepath.Base(f), start: strings.Fields(c.Deploy.StartCommand)}
		if len(c.Deploy.PreDeployCommand) == 1 {
			s.preDeploy = strings.Fields(c.Deploy.PreDeployCommand[0])
		}
		services = append(services, s)
	}

	// Railway deploys every service of a release: each pre-deploy command
	// first (the first migrates, the rest find the schema current).
	for _, s := range services {
		if res := runCommand(t, env, s.preDeploy); res.Code != 0 {
			t.Fatalf("%s: pre-deploy %q: exit %d: %s", s.name, strings.Join(s.preDeploy, " "), res.Code, res.Stderr)
		}
	}

	// Users for the jobs to move, as of the database's clock: the shipped
	// commands take no --as-of. Few: queue-process keeps the shipped
	// 500 ms pace.
	direct, err := pgxpool.New(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := seed.Generate(ctx, direct, seed.Options{Users: 30, Seed: seedNum, AsOf: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, s := range services {
		res := runCommand(t, env, s.start)
		var sum map[string]any
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &sum) != nil {
			t.Errorf("%s: %q: exit %d, stdout %q, stderr %s; want exit 0 and its JSON summary", s.name, strings.Join(s.start, " "), res.Code, res.Stdout, res.Stderr)
		}
	}
	var queued int
	if err := direct.QueryRow(ctx, `SELECT count(*) FROM engagement_message_queue`).Scan(&queued); err != nil || queued == 0 {
		t.Errorf("after the shipped start commands %d messages were queued (%v), want the daily and weekly jobs' messages", queued, err)
	}
}

// runCommand runs a shipped command line (binary and flags) in process.
func runCommand(t *testing.T, env []string, fields []string) cmdtest.Result {
	t.Helper()
	commands := map[string]func() *cobra.Command{
		"engagement-daily":  cli.NewDailyCommand,
		"engagement-weekly": cli.NewWeeklyCommand,
		"queue-process":     cli.NewQueueCommand,
		"engagementctl":     cli.NewCtlCommand,
	}
	if len(fields) == 0 || commands[fields[0]] == nil {
		t.Fatalf("shipped command %q runs no binary of the project", strings.Join(fields, " "))
	}
	return cmdtest.Exec(t, commands[fields[0]], env, fields[1:]...)
}
