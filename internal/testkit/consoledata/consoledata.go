// Package consoledata fills an empty, migrated database with the history an
// operator console reads: users with profiles and engagement states,
// transactions, the transition log, the message queue and the job runs of
// the last twelve weeks, all consistent with one another and with the
// state machine, at the sizes of a large deployment (DefaultSizes: a
// million users) in a few minutes on two cores. The console's page-speed
// benchmark seeds its database with it.
//
// Why a generator of its own rather than running the jobs (as
// internal/testkit/seeded does): replaying twelve weeks of daily runs over
// a million users would take hours. Instead every row is computed where
// it lands, by set-based SQL over generate_series (the statements are
// steps/*.sql, named in the order they run, the bookkeeping of a step
// after it, e.g. 03_users_plan; the last ones on two connections side by
// side), with deterministic pseudo-randomness: every
// draw is a hash of a row number and a stream (pg_temp.cd_u), so the same
// Sizes and asOf give the same database, ids included. At DefaultSizes it
// takes about two minutes on two cores (PostgreSQL 15), most of it the
// queue's eight indexes.
//
// What the data promises, the console may rely on:
//
//   - Row counts are exact: Sizes.Users profiles and state rows,
//     Sizes.Transitions log rows, Sizes.Messages queue rows.
//   - Current states are about 70% active, 8% goodbye_sent (sent at one of
//     the last three daily runs), 3% help_flow, 4% remind_later (remind_at
//     within the next 14 days), 15% dormant; 2% of users opted out.
//     Active users were last active within 14 days of the last daily run,
//     so the next week's forecast has goodbyes due; opted-out users may be
//     silent for weeks (the job skips them).
//   - Each user's log rows are a legal walk of the state machine's table
//     (each from_state is the previous row's to_state) that ends in their
//     current state, with increasing created_at; where Sizes.Transitions
//     is short of a user's history, the walk is cut at its old end, so the
//     first row's from_state has no row before it. The daily job's moves
//     point to the day's engagement-daily run (job_run_id), the bot's have
//     none.
//   - Goodbyes match the log: one per inactivity_14d (its key the run's UTC
//     day), failed or cancelled when the log says goodbye_undelivered
//     next. Weekly reviews (the bulk) go to users active or in help_flow at
//     a Monday's run, at most one per ISO week; reminders follow
//     reminder_due for the last five weeks. Keys, periods, catalog keys
//     and types are statemachine's kinds. About 93% are sent, 3%
//     cancelled, 2% failed, 1.5% pending (due, retried later, or held by
//     quiet hours) and a few hundred in flight, claimed by two live
//     queue-process holders. Quiet hours (21:00-09:00 local, São Paulo's
//     unless the profile says otherwise) hold what the runs queue until
//     12:00 UTC: as of a Monday morning before then, that week's reviews
//     are all still pending (about 7% of the queue) and none in flight.
//   - Runs: one engagement-daily a day at 06:00 UTC (a few partial, a few
//     days with a failed attempt before the one that did the work), one
//     engagement-weekly each Monday at 09:00 UTC, their counters shaped
//     like scheduler.Summary. queue-process records its runs too (since
//     migration 44), but none is generated here.
//
// engagementctl verify (package verify) passes on the result as of asOf:
// the package's test runs it.
//
// The schema has no users table of its own (the bot's database has one;
// the scheduler's migrations do not create it): user_profiles is the
// user's row. The send ledger (engagement_processed_messages) holds only
// the messages in flight.
package consoledata

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Sizes are the row counts to generate.
type Sizes struct {
	Users       int // users: profiles, state rows
	Messages    int // engagement_message_queue rows
	Transitions int // engagement_state_transitions rows
}

// DefaultSizes are the console benchmark's: a large deployment.
var DefaultSizes = Sizes{Users: 1_000_000, Messages: 5_000_000, Transitions: 2_000_000}

// The history's shape, in days: the log and the queue cover the 84 daily
// runs up to the last one (twelve weeks); reminders are queued from five
// weeks back (engagement-daily --send-reminder was turned on then).
const (
	windowDays         = 84
	remindersSinceDays = 35
	// A run is over this long after its as-of: asOf closer than that to
	// a scheduled run treats the run before as the last.
	runSettle = 15 * time.Minute
)

// zones are the time zones users set in their profiles (12% of them; the
// rest have none, and queue-process's --timezone, defaultZone, applies).
var zones = []string{"America/Sao_Paulo", "America/Manaus", "America/Recife", "America/Noronha",
	"Europe/Lisbon", "America/Bahia", "America/Belem"}

// defaultZone is queue-process's --timezone, as railway.cron.yml runs it.
const defaultZone = "America/Sao_Paulo"

// holders are the two queue-process processors in flight at asOf, named as
// delivery names them (host:pid:random).
var holders = []string{
	"queue-process-7c9d5f8b4-lq2xw:1:3fa91c0d7e25",
	"queue-process-7c9d5f8b4-r8mzt:1:b06e2d4f9a13",
}

// deliveryErrors are the recurring errors of failed messages, as the
// webhook transport words them: the first four transient (their messages
// failed once the retries ran out, retry_count 3), the last two permanent
// (failed at once).
var deliveryErrors = []string{
	"webhook: HTTP 500 (transient)",
	"webhook: HTTP 503 (transient, retry after 30s)",
	"webhook: request timed out after 10s (transient)",
	"webhook: request failed (transient): dial tcp 10.20.3.7:8080: connect: connection refused",
	"webhook: HTTP 422 (permanent)",
	"webhook: HTTP 410 (permanent)",
}

//go:embed steps/*.sql
var stepFiles embed.FS

// step is the statement in steps/<name>.sql.
func step(name string) string {
	b, err := fs.ReadFile(stepFiles, path.Join("steps", name+".sql"))
	if err != nil {
		panic("consoledata: missing embedded step " + name)
	}
	return string(b)
}

// Seed fills the empty, migrated database behind pool with sz's rows, a
// history of the twelve weeks before asOf (see the package comment), and
// VACUUM ANALYZEs the tables. It writes through two connections of its own,
// with the settings of a bulk load (synchronous_commit off, large
// work_mem), temporary staging tables and an unlogged one in a schema of
// its own, consoledata, all gone when it returns. Each step commits on its
// own: a failed Seed leaves the database partly filled (and may leave the
// consoledata schema), so seed a throwaway database.
//
// The sizes must be consistent: Messages must leave room for the goodbyes
// and reminders the log's moves queue plus the weekly reviews, and the
// reviews must fit the user-weeks in which users were active; Seed says so
// when they do not.
func Seed(ctx context.Context, pool *pgxpool.Pool, sz Sizes, asOf time.Time) error {
	if sz.Users <= 0 || sz.Messages < 0 || sz.Transitions < 0 {
		return fmt.Errorf("consoledata: sizes %+v: want Users > 0, Messages and Transitions >= 0", sz)
	}
	if asOf.IsZero() {
		return errors.New("consoledata: asOf is required")
	}
	g := newGenerator(sz, asOf)
	conn, err := g.connect(ctx, pool)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return g.run(ctx, pool, conn)
}

// uuidMin is the least uuid: the queue step's lower bound for all users.
const uuidMin = "00000000-0000-0000-0000-000000000000"

// generator holds the parameters one Seed's steps share.
type generator struct {
	sz   Sizes
	args stepArgs
}

// The steps' parameters (steps/*.sql's @names), bound by name
// (sqlfile.Fields): make sql cannot type the steps, which run among the
// temporary tables and functions the steps before them made. A group of
// names that is not known yet is a nil pointer, so a step that uses one
// too early fails, naming it.

// stepArgs are what the steps share: seedArgs from the start, runArgs once
// the runs are in (07_runs).
type stepArgs struct {
	seedArgs
	*runArgs
}

// seedArgs follow from the sizes and asOf.
type seedArgs struct {
	Users          int       `db:"users"`
	Transitions    int       `db:"transitions"`
	AsOf           time.Time `db:"as_of"`
	R0             time.Time `db:"r0"` // the last engagement-daily run
	W0             time.Time `db:"w0"` // the last engagement-weekly run
	Weeks          int       `db:"nw"`
	WindowStart    time.Time `db:"window_start"`
	LastActiveLo   time.Time `db:"la_lo"`
	RemindersSince time.Time `db:"reminders_since"`
	Holders        []string  `db:"holders"`
	Zones          []string  `db:"zones"`
	Errors         []string  `db:"errors"`
	GoodbyeType    string    `db:"goodbye_type"`
	ReminderType   string    `db:"reminder_type"`
	ReviewType     string    `db:"review_type"`
	GoodbyeKey     string    `db:"goodbye_key"`
	ReminderKey    string    `db:"reminder_key"`
	ReviewKey      string    `db:"review_key"`
	ReminderInfix  string    `db:"reminder_infix"`
}

// runArgs are the runs' (see generator.runs), per daily run (d_…) and
// weekly run (w_…).
type runArgs struct {
	FirstDay    time.Time   `db:"first_day"`
	FirstDaynum int64       `db:"first_daynum"`
	DayCount    int         `db:"nd"`
	ZoneCount   int         `db:"nz"`
	DailyIDs    []int64     `db:"daily_ids"`
	DAsOf       []time.Time `db:"d_asof"`
	DSuffix     []string    `db:"d_suffix"`
	DPeriod     []time.Time `db:"d_period"`
	DSched      []time.Time `db:"d_sched"`
	WeeklyIDs   []int64     `db:"weekly_ids"`
	WAsOf       []time.Time `db:"w_asof"`
	WSuffix     []string    `db:"w_suffix"`
	WPeriod     []time.Time `db:"w_period"`
	WSched      []time.Time `db:"w_sched"`
	WStarted    []time.Time `db:"w_started"`
}

// queueArgs are the queue step's own (09_messages): how the plan fills
// the queue, and the part of the users one run of the step covers.
type queueArgs struct {
	Cut      bool      `db:"cut"`
	CutAt    time.Time `db:"cut_at"`
	CutUser  string    `db:"cut_user"`
	UseEmask bool      `db:"use_emask"`
	Cands    int64     `db:"cands"`
	Reviews  int64     `db:"reviews"`
	UserLo   string    `db:"user_lo"`
	UserHi   *string   `db:"user_hi"` // nil: the last part, open
}

func newGenerator(sz Sizes, asOf time.Time) *generator {
	asOf = asOf.UTC().Truncate(time.Microsecond)
	settled := asOf.Add(-runSettle)
	// r0: the last engagement-daily run (06:00 UTC); w0: the last
	// engagement-weekly run (Monday 09:00 UTC).
	r0 := time.Date(settled.Year(), settled.Month(), settled.Day(), 6, 0, 0, 0, time.UTC)
	if r0.After(settled) {
		r0 = r0.AddDate(0, 0, -1)
	}
	w0 := time.Date(settled.Year(), settled.Month(), settled.Day(), 9, 0, 0, 0, time.UTC)
	w0 = w0.AddDate(0, 0, -((int(w0.Weekday()) + 6) % 7))
	if w0.After(settled) {
		w0 = w0.AddDate(0, 0, -7)
	}
	windowStart := r0.AddDate(0, 0, -(windowDays - 1))
	weeks := int(w0.Sub(windowStart)/(7*24*time.Hour)) + 1

	kind := func(m sm.Message) sm.Kind {
		k, ok := sm.KindOf(m)
		if !ok {
			panic("consoledata: statemachine has no kind " + string(m))
		}
		return k
	}
	goodbye, reminder, review := kind(sm.GoodbyeMessage), kind(sm.ReminderMessage), kind(sm.WeeklyReviewMessage)
	return &generator{sz: sz, args: stepArgs{seedArgs: seedArgs{
		Users:          sz.Users,
		Transitions:    sz.Transitions,
		AsOf:           asOf,
		R0:             r0,
		W0:             w0,
		Weeks:          weeks,
		WindowStart:    windowStart,
		LastActiveLo:   r0.Add(-sm.InactivityPeriod + time.Hour),
		RemindersSince: r0.AddDate(0, 0, -remindersSinceDays),
		Holders:        holders,
		Zones:          zones,
		Errors:         deliveryErrors,
		GoodbyeType:    string(goodbye.Message),
		ReminderType:   string(reminder.Message),
		ReviewType:     string(review.Message),
		GoodbyeKey:     goodbye.CatalogKey,
		ReminderKey:    reminder.CatalogKey,
		ReviewKey:      review.CatalogKey,
		ReminderInfix:  reminder.KeyInfix,
	}}}
}

// connect opens a connection of Seed's own to pool's database and prepares
// its session (steps/00_session.sql).
func (g *generator) connect(ctx context.Context, pool *pgxpool.Pool) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("consoledata: connect: %w", err)
	}
	// Several statements, no arguments: the simple protocol.
	if _, err := conn.Exec(ctx, step("00_session"), pgx.QueryExecModeSimpleProtocol); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("consoledata: step 00_session: %w", err)
	}
	return conn, nil
}

// exec runs step name on conn with args, a struct of tagged fields
// (sqlfile.Fields): the shared g.args, or more.
func (g *generator) exec(ctx context.Context, conn *pgx.Conn, name string, args any) error {
	if _, err := conn.Exec(ctx, step(name), sqlfile.Fields(args)); err != nil {
		return fmt.Errorf("consoledata: step %s: %w", name, err)
	}
	return nil
}

// queueParts split the queue step by user_id (the lower bound of each
// part; the last is open), so that two connections share it: four parts,
// as the second connection starts on them while the first loads the
// profiles, states, transactions and log.
var queueParts = []string{uuidMin, "40000000-0000-0000-0000-000000000000",
	"80000000-0000-0000-0000-000000000000", "c0000000-0000-0000-0000-000000000000"}

func (g *generator) run(ctx context.Context, pool *pgxpool.Pool, first *pgx.Conn) (err error) {
	if _, err := first.Exec(ctx, step("00_stage")); err != nil {
		return fmt.Errorf("consoledata: staging schema: %w", err)
	}
	defer func() {
		if err != nil { // best effort: the connection may be what failed
			_, _ = first.Exec(context.WithoutCancel(ctx), step("99_abandon"))
		}
	}()
	for _, name := range []string{"01_seed", "02_chain", "03_users"} {
		if err := g.exec(ctx, first, name, g.args); err != nil {
			return err
		}
	}
	if _, err := first.Exec(ctx, step("03_users_staged"), pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("consoledata: staging: %w", err)
	}
	plan, err := g.plan(ctx, first)
	if err != nil {
		return err
	}
	if err := g.exec(ctx, first, "07_runs", struct {
		seedArgs
		FirstDay time.Time `db:"first_day"`
	}{g.args.seedArgs, plan.firstDay}); err != nil {
		return err
	}
	if g.args.runArgs, err = g.runs(ctx, first, plan.firstDay); err != nil {
		return err
	}

	// Two connections side by side (the machine's two cores): the first
	// loads profiles, states (which need the profiles), transactions and
	// the log, then helps with the queue; the second starts on the queue.
	second, err := g.connect(ctx, pool)
	if err != nil {
		return err
	}
	defer second.Close(context.WithoutCancel(ctx))
	type queuePart struct {
		stepArgs
		queueArgs
	}
	parts := make(chan queuePart, len(queueParts))
	for i, lo := range queueParts {
		part := queuePart{g.args, plan.messages}
		part.UserLo = lo
		if i+1 < len(queueParts) {
			part.UserHi = &queueParts[i+1]
		}
		parts <- part
	}
	close(parts)
	queue := func(ctx context.Context, conn *pgx.Conn) error {
		for part := range parts {
			if err := g.exec(ctx, conn, "09_messages", part); err != nil {
				return err
			}
		}
		return nil
	}
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() error {
		if err := g.exec(ectx, first, "04_profiles", g.args); err != nil {
			return err
		}
		if err := g.states(ectx, first); err != nil {
			return err
		}
		for _, name := range []string{"06_transactions", "08_transitions"} {
			if err := g.exec(ectx, first, name, g.args); err != nil {
				return err
			}
		}
		return queue(ectx, first)
	})
	eg.Go(func() error { return queue(ectx, second) })
	if err := eg.Wait(); err != nil {
		return err
	}

	for _, name := range []string{"10_run_counters", "11_delivery"} {
		if err := g.exec(ctx, first, name, g.args); err != nil {
			return err
		}
	}
	if _, err := first.Exec(ctx, step("12_unstage")); err != nil {
		return fmt.Errorf("consoledata: staging: %w", err)
	}
	if _, err := first.Exec(ctx, step("13_vacuum")); err != nil {
		return fmt.Errorf("consoledata: vacuum analyze: %w", err)
	}
	return nil
}

// states loads the state rows (05_states). Each row's foreign key to its
// profile holds by construction (the profiles went in first, from the same
// users; the test checks), so where the role may (a superuser, as in the
// test kit's databases) the load skips the per-row check of that key, the
// larger part of its cost, by session_replication_role = replica, which
// fires no trigger and so no foreign-key check; elsewhere it checks them.
func (g *generator) states(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, step("05_states_unchecked"))
	skipped := err == nil
	if err := g.exec(ctx, conn, "05_states", g.args); err != nil {
		return err
	}
	if skipped {
		if _, err := conn.Exec(ctx, step("05_states_checked")); err != nil {
			return fmt.Errorf("consoledata: reset session_replication_role: %w", err)
		}
	}
	return nil
}

// seedPlan is what the staged users decide about the rest: the first daily run
// the log needs and the arguments of the queue's step.
type seedPlan struct {
	firstDay time.Time
	messages queueArgs // but the part's
}

// plan counts, from the staged users, the log rows (which must be exactly
// Sizes.Transitions), the goodbyes and reminders their moves queue and the
// user-weeks a review could go to, and decides how the queue gets exactly
// Sizes.Messages rows: every goodbye and reminder plus the rest in reviews
// or, when the goodbyes and reminders alone are more than that, only the
// newest of them (as engagementctl cleanup leaves a queue), no reviews.
func (g *generator) plan(ctx context.Context, conn *pgx.Conn) (seedPlan, error) {
	// Read by name (the staged tables are Seed's own: make sql cannot
	// type these).
	rows, _ := conn.Query(ctx, step("03_users_plan"), sqlfile.Fields(g.args))
	staged, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[struct {
		Moves        int64      `db:"moves"`
		Goodbyes     int64      `db:"goodbyes"`
		Reminders    int64      `db:"reminders"`
		AllWeeks     int64      `db:"all_weeks"`
		EngagedWeeks int64      `db:"engaged_weeks"`
		Earliest     *time.Time `db:"earliest"`
	}])
	if err != nil {
		return seedPlan{}, fmt.Errorf("consoledata: count the staged history: %w", err)
	}
	goodbyes, reminders, all, engaged := staged.Goodbyes, staged.Reminders, staged.AllWeeks, staged.EngagedWeeks
	if staged.Moves != int64(g.sz.Transitions) {
		return seedPlan{}, fmt.Errorf("consoledata: the staged history has %d moves, want %d", staged.Moves, g.sz.Transitions)
	}
	p := seedPlan{firstDay: g.args.WindowStart}
	if staged.Earliest != nil {
		// A history longer than the window (many transitions per user)
		// needs the runs of its earlier days too.
		for p.firstDay.After(*staged.Earliest) && p.firstDay.After(g.args.R0.AddDate(-20, 0, 0)) {
			p.firstDay = p.firstDay.AddDate(0, 0, -1)
		}
	}

	m := queueArgs{CutUser: uuidMin, UseEmask: true, Cands: engaged}
	reviews := int64(g.sz.Messages) - goodbyes - reminders
	switch {
	case reviews < 0:
		if g.sz.Messages == 0 {
			m.Cut, m.CutAt = true, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
			break
		}
		rows, _ := conn.Query(ctx, step("03_users_cut"), sqlfile.Fields(struct {
			seedArgs
			Offset int `db:"offset"`
		}{g.args.seedArgs, g.sz.Messages - 1}))
		kept, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[struct {
			At     time.Time `db:"at"`
			UserID string    `db:"user_id"`
		}])
		if err != nil {
			return seedPlan{}, fmt.Errorf("consoledata: find the oldest goodbye kept: %w", err)
		}
		m.Cut, m.CutAt, m.CutUser = true, kept.At, kept.UserID
	case reviews <= engaged:
		m.Reviews = reviews
	case reviews <= all:
		m.Reviews, m.UseEmask, m.Cands = reviews, false, all
	default:
		return seedPlan{}, fmt.Errorf("consoledata: %d messages leave %d weekly reviews (after %d goodbyes and %d reminders), "+
			"but the users were active in only %d user-weeks: ask for at most %d messages, or more users",
			g.sz.Messages, reviews, goodbyes, reminders, all, goodbyes+reminders+all)
	}
	p.messages = m
	return p, nil
}

// runs reads back the ids of the runs that did each day's and each week's
// work and returns them with what else is the same for every message of a
// run, as the queue step takes them: for daily run n (1-based from
// firstDay) and weekly run j (0-based back from w0) the as-of, the run's
// id, the key suffix and period of the goodbye (daily) and the review
// (weekly), when the weekly run started, and per run and zone (0: the
// default, then zones) where quiet hours put scheduled_for.
func (g *generator) runs(ctx context.Context, conn *pgx.Conn, firstDay time.Time) (*runArgs, error) {
	r0, w0, weeks := g.args.R0, g.args.W0, g.args.Weeks
	days := int(r0.Sub(firstDay)/(24*time.Hour)) + 1
	dAsOf, wAsOf := make([]time.Time, days), make([]time.Time, weeks)
	dIDs, wIDs := make([]int64, days), make([]int64, weeks)
	dSuffix, wSuffix := make([]string, days), make([]string, weeks)
	dPeriod, wPeriod := make([]time.Time, days), make([]time.Time, weeks)
	goodbye, _ := sm.KindOf(sm.GoodbyeMessage)
	review, _ := sm.KindOf(sm.WeeklyReviewMessage)
	for n := range days {
		dAsOf[n] = firstDay.AddDate(0, 0, n)
		dSuffix[n] = goodbye.KeySuffix(dAsOf[n])
		dPeriod[n], _ = goodbye.Period.Bounds(dAsOf[n])
	}
	for j := range weeks {
		wAsOf[j] = w0.AddDate(0, 0, -7*j)
		wSuffix[j] = review.KeySuffix(wAsOf[j])
		wPeriod[j], _ = review.Period.Bounds(wAsOf[j])
	}

	rows, _ := conn.Query(ctx, step("07_runs_read"))
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByName[struct {
		ID   int64     `db:"id"`
		Job  string    `db:"job"`
		AsOf time.Time `db:"as_of"`
	}])
	if err != nil {
		return nil, fmt.Errorf("consoledata: read the runs: %w", err)
	}
	for _, run := range runs {
		switch run.Job {
		case "engagement-daily":
			dIDs[int(run.AsOf.Sub(firstDay)/(24*time.Hour))] = run.ID
		case "engagement-weekly":
			wIDs[int(w0.Sub(run.AsOf)/(7*24*time.Hour))] = run.ID
		}
	}
	if slices.Contains(dIDs, 0) || slices.Contains(wIDs, 0) {
		return nil, errors.New("consoledata: a day or week has no run")
	}

	// Quiet hours are decided where queue-process decides them, in SQL
	// (pg_temp.cd_defer), once per run and zone.
	allZones := append([]string{defaultZone}, zones...)
	quiet := func(at []time.Time) ([]time.Time, error) {
		rows, _ := conn.Query(ctx, step("07_runs_quiet"), sqlfile.Fields(struct {
			At    []time.Time `db:"at"`
			Zones []string    `db:"zones"`
		}{at, allZones}))
		return pgx.CollectOneRow(rows, pgx.RowTo[[]time.Time])
	}
	dSched, err := quiet(dAsOf)
	if err != nil {
		return nil, fmt.Errorf("consoledata: quiet hours: %w", err)
	}
	wSched, err := quiet(wAsOf)
	if err != nil {
		return nil, fmt.Errorf("consoledata: quiet hours: %w", err)
	}
	rows, _ = conn.Query(ctx, step("07_runs_weekly_started"), sqlfile.Fields(struct {
		AsOfs []time.Time `db:"as_ofs"`
	}{wAsOf}))
	wStarted, err := pgx.CollectOneRow(rows, pgx.RowTo[[]time.Time])
	if err != nil {
		return nil, fmt.Errorf("consoledata: weekly runs: %w", err)
	}
	return &runArgs{
		FirstDay: firstDay, FirstDaynum: firstDay.Unix() / 86400, DayCount: days, ZoneCount: len(allZones),
		DailyIDs: dIDs, DAsOf: dAsOf, DSuffix: dSuffix, DPeriod: dPeriod, DSched: dSched,
		WeeklyIDs: wIDs, WAsOf: wAsOf, WSuffix: wSuffix, WPeriod: wPeriod, WSched: wSched, WStarted: wStarted,
	}, nil
}
