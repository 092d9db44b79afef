package poolertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/bcrypt"

	"github.com/engagement-scheduler/engagement/internal/cli/consolecmd"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
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
//
// Issue 30: and on the database the jobs are meant for, the bot's, with
// the bot's rows and the old scheduler's queue in it. There the pre-deploy
// commands change none of the bot's rows or definitions and leave the
// schema at the latest version, the start commands succeed on the bot's
// rows, and the next release's pre-deploy `migrate up` is a no-op.
func TestTheShippedRailwayFilesDeployOnSupabasesPoolers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := pgtest.ServerURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// One pooler of each mode, as a Supabase project has; each serves
	// every database of the server.
	transactionPooler := pgtest.NewBouncerFor(t, srv, pgtest.TransactionMode)
	sessionPooler := pgtest.NewBouncerFor(t, srv, pgtest.SessionMode)

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

	for _, tc := range []struct {
		name string
		// database creates the database the deploy starts from.
		database func(t *testing.T) string
		// bots is true for the bot's database with its rows: the jobs
		// find their users there, and what the bot defined and wrote
		// must survive the pre-deploy commands unchanged.
		bots bool
	}{
		{"empty database", func(t *testing.T) string { return pgtest.NewEmptyDatabase(t) }, false},
		// The bot's rows as of now, to the second: the shipped start
		// commands take no --as-of and run as of the database's clock.
		{"bot's database with its rows", func(t *testing.T) string {
			return botdb.NewDatabaseWithRows(t, time.Now().Truncate(time.Second))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := tc.database(t)
			env := cmdtest.Env("DATABASE_URL="+transactionPooler.URL(t, db), "MIGRATE_DATABASE_URL="+sessionPooler.URL(t, db))
			direct, err := pgx.Connect(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close(ctx)

			var bots botdb.Snapshot
			if tc.bots {
				if bots, err = botdb.Take(ctx, direct); err != nil {
					t.Fatal(err)
				}
			}
			// Railway deploys every service of a release: each pre-deploy
			// command first (the first migrates, the rest find the schema
			// current).
			for _, s := range services {
				if res := runCommand(t, env, s.preDeploy); res.Code != 0 {
					t.Fatalf("%s: pre-deploy %q: exit %d: %s", s.name, strings.Join(s.preDeploy, " "), res.Code, res.Stderr)
				}
				if tc.bots {
					noChanges(t, direct, bots, s.name+": pre-deploy "+strings.Join(s.preDeploy, " "))
				}
			}
			if v, dirty := fixture.SchemaVersion(t, direct); v != int(migrations.Latest) || dirty {
				t.Fatalf("after the pre-deploy commands: schema version %d dirty %v, want %d clean", v, dirty, migrations.Latest)
			}

			// Users for the jobs to move, as of the database's clock: the
			// shipped commands take no --as-of. Whatever the hour, the run
			// is short: in the quiet hours their messages wait for 09:00 in
			// São Paulo; out of them queue-process sends the first slot's
			// at once and stops as its next slot (the shipped pace: a
			// minute and more apart, the day's budget spread over the
			// waking hours) falls after its --max-duration. On the bot's
			// database its own rows are those users.
			if !tc.bots {
				if _, err := seed.Generate(ctx, direct, seed.Options{Users: 30, Seed: seedNum, AsOf: time.Now()}); err != nil {
					t.Fatal(err)
				}
			}
			before := fixture.CountMessages(t, direct, fixture.Messages{})
			for _, s := range services {
				if s.start[0] == consolecmd.Name {
					serveConsole(t, env, s.start)
					continue
				}
				// queue-process's transport is a variable of its service
				// (railway.cron.yml): the daily and weekly jobs only queue.
				// Given it, theirs would send on at the shipped pace, with
				// no --max-duration, for as long as messages are due: after
				// the quiet hours (09:00 in São Paulo), for hours.
				serviceEnv := env
				if s.start[0] == "queue-process" {
					serviceEnv = append(env[:len(env):len(env)], "ENGAGEMENT_TRANSPORT=log")
				}
				res := runCommand(t, serviceEnv, s.start)
				var sum map[string]any
				if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &sum) != nil {
					t.Errorf("%s: %q: exit %d, stdout %q, stderr %s; want exit 0 and its JSON summary", s.name, strings.Join(s.start, " "), res.Code, res.Stdout, res.Stderr)
				}
			}
			if queued := fixture.CountMessages(t, direct, fixture.Messages{}); queued <= before {
				t.Errorf("after the shipped start commands the queue holds %d messages, %d before them; want the daily and weekly jobs' messages added", queued, before)
			}

			// The next release: its pre-deploy `migrate up` finds the
			// schema current and changes nothing, the bot's rows (as the
			// jobs left them) included.
			if tc.bots {
				if bots, err = botdb.Take(ctx, direct); err != nil {
					t.Fatal(err)
				}
			}
			s := services[0]
			if res := runCommand(t, env, s.preDeploy); res.Code != 0 {
				t.Errorf("%s: the next release's pre-deploy %q: exit %d: %s", s.name, strings.Join(s.preDeploy, " "), res.Code, res.Stderr)
			}
			if v, dirty := fixture.SchemaVersion(t, direct); v != int(migrations.Latest) || dirty {
				t.Errorf("after the next release's pre-deploy: schema version %d dirty %v, want %d clean, unchanged", v, dirty, migrations.Latest)
			}
			if tc.bots {
				noChanges(t, direct, bots, s.name+": the next release's pre-deploy "+strings.Join(s.preDeploy, " "))
			}
		})
	}
}

// noChanges fails t for each of the bot's rows or definitions that differ
// on conn from snap, after what.
func noChanges(t *testing.T, conn *pgx.Conn, snap botdb.Snapshot, what string) {
	t.Helper()
	changes, err := snap.Changes(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		t.Errorf("%s changed the bot's %s", what, c)
	}
}

// runCommand runs a shipped command line (binary and flags) in process.
func runCommand(t *testing.T, env []string, fields []string) cmdtest.Result {
	t.Helper()
	commands := map[string]func() *cobra.Command{
		"engagement-daily":  jobcmd.NewDailyCommand,
		"engagement-weekly": jobcmd.NewWeeklyCommand,
		"queue-process":     queuecmd.NewCommand,
		"engagementctl":     ctl.NewCommand,
		consolecmd.Name:     consolecmd.NewCommand,
	}
	if len(fields) == 0 || commands[fields[0]] == nil {
		t.Fatalf("shipped command %q runs no binary of the project", strings.Join(fields, " "))
	}
	return cmdtest.Exec(t, commands[fields[0]], env, fields[1:]...)
}

// serveConsole runs the console's shipped start command as Railway would
// (PORT set, so on every interface, with the htpasswd entries in a
// variable), checks that its health check and a signed-in page answer
// through the transaction pooler, and stops it: exit 0.
func serveConsole(t *testing.T, env []string, fields []string) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	env = append(env[:len(env):len(env)], fmt.Sprintf("PORT=%d", port),
		"ENGAGEMENT_CONSOLE_HTPASSWD=ops:"+string(hash), "ENGAGEMENT_CONSOLE_OPERATORS=ops")
	running := cmdtest.Start(consolecmd.NewCommand, env, fields[1:]...)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(base + "/healthz") //nolint:gosec // the test's own server
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-running.Done():
			res := running.Wait()
			t.Fatalf("%s exited %d before its health check answered: %s", consolecmd.Name, res.Code, res.Stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /healthz did not answer 200 within a minute", consolecmd.Name)
		}
		time.Sleep(50 * time.Millisecond) // polling a starting server, not timing a test
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/queue", nil)
	req.SetBasicAuth("ops", "pw")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: GET /queue through the transaction pooler: %d, want 200", consolecmd.Name, resp.StatusCode)
	}
	if res := running.Stop(); res.Code != 0 {
		t.Errorf("%s stopped: exit %d, want 0: %s", consolecmd.Name, res.Code, res.Stderr)
	}
}
