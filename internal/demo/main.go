// Command demo shows the engagement scheduler on a throwaway database: it
// seeds a few hundred sample users, runs the real engagement-daily binary
// over three days and engagement-weekly twice, delivers the messages with
// queue-process, and prints how the users move, what was queued and sent,
// and what `engagementctl status` and `verify` say. When it had to start
// a throwaway PostgreSQL cluster, it stops it at the end (unless -keep).
// `make demo` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding the built binaries")
	users := flag.Int("users", 300, "sample users to seed")
	keep := flag.Bool("keep", false, "leave a throwaway PostgreSQL the demo started running, to look around")
	database := flag.String("database", "engagement_demo", "the database to (re)create for the demo")
	console := flag.String("console", "", "serve engagement-console on this loopback address over the demo's database until Ctrl-C (running the demo first when its database is not there)")
	flag.Parse()
	// Ctrl-C or SIGTERM stops the console (-console) cleanly: the demo then
	// exits 0, so `make console` ends without an error.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !*keep {
		pgtest.WillStopThrowaway() // so that pgtest does not announce it stays running
	}
	var err error
	if *console != "" {
		err = serveConsole(ctx, *bin, *database, *users, *console)
	} else {
		_, err = run(ctx, *bin, *database, *users, *keep)
		if err == nil {
			fmt.Println("\nSee it all in the web console: make console (then open http://127.0.0.1:8080/)")
		}
	}
	if pgtest.StartedThrowaway() && !*keep {
		fmt.Println("\nStopping the throwaway PostgreSQL the demo started (`make demo DEMO_FLAGS=-keep` keeps it).")
		if _, stopErr := pgtest.StopThrowaway(); stopErr != nil && err == nil {
			err = stopErr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// bestHour is the day-1 run's best-hour arm (issue 61): half the users
// get their goodbye at the hour they usually write (the history the demo
// gives them), the others at the run's time, and the console's overview
// compares the two.
var bestHour = []string{"--best-hour-percent", "50"}

// The shipped configurations' waking hours (docs/deploy.md): the demo
// delivers as a deployment would.
var wakingHours = []string{"--quiet-hours", "21:00-09:00", "--timezone", "America/Sao_Paulo"}

// serveConsole runs engagement-console over the demo's database, on
// loopback without authentication, until ctx ends (Ctrl-C, SIGTERM); when
// the database is not there yet, the demo makes it first. The console's
// pages treat the demo's last simulated day as now (--as-of): the demo ran
// the daily job two days ahead, and by the real clock that day's goodbyes
// would look sent in the future and its timeouts early. A console that
// stops cleanly when asked is a success.
func serveConsole(ctx context.Context, bin, database string, users int, addr string) error {
	url, err := demoDatabase(ctx, database)
	if err != nil {
		return err
	}
	if url == "" {
		fmt.Printf("No demo database (%s) yet: running the demo first.\n", database)
		if url, err = run(ctx, bin, database, users, true); err != nil {
			return err
		}
	}
	asOf, err := demoDay(ctx, url)
	if err != nil {
		return err
	}
	step("engagement-console on the demo's database (Ctrl-C stops it)")
	fmt.Printf("Open http://%s/ in a browser. The pages treat %s, the last day the demo simulated, as now (--as-of).\n",
		addr, asOf.Format("2006-01-02 15:04 UTC"))
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "engagement-console"), "--listen", addr, "--log-format", "console",
		"--as-of", asOf.Format(time.RFC3339))
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second // the console lets requests finish for 10 s at most
	err = cmd.Run()
	if ctx.Err() != nil && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		return nil // stopped when asked, and cleanly
	}
	if err != nil {
		return fmt.Errorf("engagement-console: %w", err)
	}
	return nil
}

// demoDay is the demo's "now": the latest instant it simulated (day 3's
// last delivery).
func demoDay(ctx context.Context, url string) (time.Time, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return time.Time{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	row, err := lastDayQuery.One(ctx, conn, sqlfile.None{})
	if err != nil {
		return time.Time{}, fmt.Errorf("the demo's last day: %w", err)
	}
	day := row.LastDay
	if day == nil {
		return time.Time{}, fmt.Errorf("the demo's database %s has no job run: run make demo again", conn.Config().Database)
	}
	// Up to the next second: --as-of is read to the second, and the last
	// send a fraction past it would be in the console's future.
	return day.UTC().Add(time.Second - 1).Truncate(time.Second), nil
}

// demoDatabase returns the URL of the demo's database when it exists and
// holds the scheduler's schema, or "".
func demoDatabase(ctx context.Context, database string) (string, error) {
	srv, err := pgtest.ServerURL(ctx)
	if err != nil {
		return "", err
	}
	cfg, err := pgx.ParseConfig(srv)
	if err != nil {
		return "", err
	}
	cfg.Database = database
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", nil // no such database (or not ours to read): the demo makes it
	}
	defer conn.Close(ctx)
	if row, err := migratedQuery.One(ctx, conn, sqlfile.None{}); err != nil || !row.Migrated {
		return "", nil
	}
	u, err := url.Parse(srv)
	if err != nil {
		return "", err
	}
	u.Path = "/" + database
	return u.String(), nil
}

// demo is one run's surroundings: the built binaries' directory, the demo
// database's URL, the demo's own pool, the users to seed and the story's
// days, so that each chapter of the story below is a method that reads as
// the steps it prints.
type demo struct {
	bin        string
	url        string
	pool       *pgxpool.Pool
	users      int
	day1, day3 time.Time
}

func run(ctx context.Context, bin, database string, users int, keep bool) (string, error) {
	step("A throwaway database")
	url, err := pgtest.CreateDatabase(ctx, database)
	if err != nil {
		return "", err
	}
	fmt.Println("created database", database)

	step("engagementctl migrate up (already applied: a no-op)")
	if err := runBinary(ctx, bin, url, "engagementctl", "migrate", "up"); err != nil {
		return "", err
	}

	pool, err := pgxpool.New(ctx, url) // not the binaries' pool: the demo's own, to move its clock
	if err != nil {
		return "", err
	}
	defer pool.Close()
	// Day 1 is now, by the database's clock: queue-process delivers and
	// stamps sent_at by that clock, and a goodbye's 48 hours count from it.
	first, err := dayOneQuery.One(ctx, pool, sqlfile.None{})
	if err != nil {
		return "", err
	}
	day1 := first.DayOne.UTC()
	d := demo{bin: bin, url: url, pool: pool, users: users, day1: day1, day3: day1.Truncate(time.Hour).Add(49 * time.Hour)}
	for _, chapter := range []func(demo, context.Context) error{
		demo.seedUsers, demo.dayOne, demo.printAnswers, demo.dayThree, demo.deliverDayThree, demo.operatorView,
	} {
		if err := chapter(d, ctx); err != nil {
			return "", err
		}
	}

	if !pgtest.StartedThrowaway() || keep {
		fmt.Printf("\nLook around with:\n  psql '%s'\n", url)
	}
	if pgtest.StartedThrowaway() && keep {
		fmt.Println("Stop the throwaway PostgreSQL with: make pg-stop")
	}
	return url, nil
}

// seedUsers seeds the sample users as of day 1, spreads them over three
// time zones and gives them a history of messages to the bot, printing
// what quiet hours mean for each zone right now.
func (d demo) seedUsers(ctx context.Context) error {
	users, day1 := d.users, d.day1
	step(fmt.Sprintf("%d sample users, as of %s", users, day1.Format(time.RFC3339)))
	if _, err := seed.Generate(ctx, d.pool, seed.Options{Users: users, Seed: 42, AsOf: day1}); err != nil {
		return err
	}
	if err := printStates(ctx, d.pool); err != nil {
		return err
	}
	// Some users live abroad: a third get Lisbon's zone, a third Tokyo's;
	// the rest have none and take the shipped default, São Paulo's. At any
	// hour some of them are awake, so the demo both delivers and defers.
	if _, err := zonesQuery.Exec(ctx, d.pool, sqlfile.None{}); err != nil {
		return err
	}
	fmt.Println("\nQuiet hours 21:00-09:00 in each user's zone (São Paulo's when unknown); right now:")
	for _, zone := range []string{"America/Sao_Paulo", "Europe/Lisbon", "Asia/Tokyo"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			return err
		}
		local, verdict := day1.In(loc), "awake: messages go out"
		if h := local.Hour(); h >= 21 || h < 9 {
			verdict = "quiet: messages wait until 09:00 there"
		}
		fmt.Printf("  %-18s %s  %s\n", zone, local.Format("15:04"), verdict)
	}

	step("Their history: each writes to the bot at an hour of their own (engagement_fire 'user_message', on four days before day 1)")
	fired, err := historyQuery.One(ctx, d.pool, historyArgs{Trigger: string(sm.UserMessage), DayOne: day1, Active: string(sm.Active)})
	if err != nil {
		return fmt.Errorf("the users' history: %w", err)
	}
	fmt.Printf("%d messages from %d users\n", fired.Fired, fired.Fired/4)
	return nil
}

// dayOne runs engagement-daily on day 1 and delivers what it queued, then
// runs it again to show that re-running the same day changes nothing.
func (d demo) dayOne(ctx context.Context) error {
	day1 := d.day1
	day1Args := append([]string{"--as-of", day1.Format(time.RFC3339), "--holdout-percent", "20"}, bestHour...)
	days := []struct {
		title   string
		args    []string
		deliver bool
	}{
		{"Day 1: inactive users get a goodbye (1 in 5 held out, to measure it), expired goodbyes and due reminders go dormant",
			day1Args, true},
		{"Day 1 again: re-running the same day changes nothing", day1Args, false},
	}
	for _, day := range days {
		step(day.title)
		if err := runBinary(ctx, d.bin, d.url, "engagement-daily", append(day.args, "--log-level", "warn")...); err != nil {
			return err
		}
		fmt.Println()
		if err := printStates(ctx, d.pool); err != nil {
			return err
		}
		if day.deliver {
			step("queue-process delivers the day's goodbyes (the log transport; its lines go to stderr, here discarded)")
			if err := deliver(ctx, d.bin, d.url, time.Time{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// printAnswers counts the receipts and the users' answers the seed left,
// as the bot reports them, and shows where the answers moved the users.
func (d demo) printAnswers(ctx context.Context) error {
	step("WhatsApp's receipts and the users' answers, as the bot reports them (engagement_receipt, engagement_fire)")
	receipts, err := receiptsQuery.One(ctx, d.pool, receiptsArgs{Delivered: activity.ReceiptDelivered, Read: activity.ReceiptRead})
	if err != nil {
		return fmt.Errorf("the receipts: %w", err)
	}
	replies, err := repliesQuery.One(ctx, d.pool, repliesArgs{Comeback: string(sm.UserMessage), Help: string(sm.GoodbyeAnswerHelp),
		RemindLater: string(sm.GoodbyeAnswerRemindLater), NotNow: string(sm.GoodbyeAnswerDormant),
		GoodbyeState: string(sm.GoodbyeSent), GoodbyeKind: string(sm.GoodbyeMessage)})
	if err != nil {
		return fmt.Errorf("the answers: %w", err)
	}
	fmt.Printf("%d receipts, %d answers and messages\n", receipts.Receipts, replies.Fired)
	return printStates(ctx, d.pool)
}

// dayThree simulates the two days up to day 3: deliveries every 3 hours,
// then day 3's engagement-daily and two engagement-weekly runs, and puts
// day 3's messages on the demo's timeline.
func (d demo) dayThree(ctx context.Context) error {
	day1, day3 := d.day1, d.day3
	// Two days ahead is the future: --allow-future-as-of says the
	// simulation is meant (without it the jobs and queue-process refuse,
	// exit 2). queue-process then stamps its sends at the simulated
	// instant, so the console sees them on the demo's timeline.
	step("Days 1 to 3, simulated: queue-process every 3 hours, sending what quiet hours held back as each user's morning comes")
	for at := day1.Truncate(time.Hour).Add(3 * time.Hour); at.Before(day3); at = at.Add(3 * time.Hour) {
		if err := deliver(ctx, d.bin, d.url, at); err != nil {
			return err
		}
	}

	future := []string{"--as-of", day3.Format(time.RFC3339), "--allow-future-as-of", "--log-level", "warn"}
	step("Day 3, simulated: goodbyes delivered over 48 h ago and unanswered: dormant (those delivered later keep their 48 h)")
	if err := runBinary(ctx, d.bin, d.url, "engagement-daily", future...); err != nil {
		return err
	}
	fmt.Println()
	if err := printStates(ctx, d.pool); err != nil {
		return err
	}

	weekly := []string{"Weekly review: users active in the last 7 days get one", "Weekly review again: one review per user per ISO week"}
	for _, title := range weekly {
		step(title + " (day 3)")
		if err := runBinary(ctx, d.bin, d.url, "engagement-weekly", future...); err != nil {
			return err
		}
	}

	if _, err := dueOnTimelineQuery.Exec(ctx, d.pool, sqlfile.None{}); err != nil {
		return fmt.Errorf("day 3's messages on the demo's timeline: %w", err)
	}
	return nil
}

// deliverDayThree shows what was queued, then delivers it hour by hour
// until day 3's evening and shows the queue again.
func (d demo) deliverDayThree(ctx context.Context) error {
	day3 := d.day3
	step("What was queued")
	if err := printQueue(ctx, d.pool); err != nil {
		return err
	}

	step("Day 3, simulated: queue-process every hour until its evening, delivering the reviews as each user's morning comes")
	for at := day3; at.Before(day3.Add(12 * time.Hour)); at = at.Add(time.Hour) {
		if err := deliver(ctx, d.bin, d.url, at); err != nil {
			return err
		}
	}
	fmt.Println()
	return printQueue(ctx, d.pool)
}

// operatorView runs engagementctl status and verify: what an operator
// sees after the three days, and that the invariants hold.
func (d demo) operatorView(ctx context.Context) error {
	step("engagementctl status: what an operator sees")
	if err := runBinary(ctx, d.bin, d.url, "engagementctl", "status"); err != nil {
		return err
	}
	step("engagementctl verify: the invariants hold")
	return runBinary(ctx, d.bin, d.url, "engagementctl", "verify")
}

// deliver runs queue-process over the log transport, in waking hours, as
// of at (the database clock when zero; a later instant is simulated).
// A simulated instant is a whole hour, as the times quiet hours and best
// hours send at are: a run as of 14:59 finds a message due at 15:00, a
// simulated minute ahead, and waits a real one for it.
func deliver(ctx context.Context, bin, url string, at time.Time) error {
	args := append([]string{"--transport", "log", "--send-interval", "0"}, wakingHours...)
	if !at.IsZero() {
		args = append(args, "--as-of", at.Format(time.RFC3339), "--allow-future-as-of")
	}
	return runBinary(ctx, bin, url, "queue-process", append(args, "--log-level", "warn")...)
}

func step(title string) {
	fmt.Printf("\n== %s\n", title)
}

func runBinary(ctx context.Context, bin, url, name string, args ...string) error {
	path := filepath.Join(bin, name)
	fmt.Printf("$ %s %s\n", name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "LOG_FORMAT=console")
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	if name == "queue-process" {
		cmd.Stderr = io.Discard // the log transport writes a line per message
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func printStates(ctx context.Context, pool *pgxpool.Pool) error {
	var states []string
	for _, s := range sm.States() {
		states = append(states, string(s))
	}
	rows, err := statesQuery.All(ctx, pool, statesArgs{States: states})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "state\tusers\topted out\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", r.State, r.Users, r.OptedOut)
	}
	return tw.Flush()
}

func printQueue(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := queueQuery.All(ctx, pool, sqlfile.None{})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\tdestination\tstatus\tmessages\tdistinct keys\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t\n", r.MessageType, r.Destination, r.Status, r.Messages, r.Keys)
	}
	return tw.Flush()
}
