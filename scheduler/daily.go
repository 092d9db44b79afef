// Package scheduler runs the engagement jobs: set-based, batched moves of
// users through the state machine, each with its messages and its log row.
//
// Every job is safe to run again at any time. Each batch is one statement
// over a chunk of user_engagement_states' pages that checks, row by row,
// that the user qualifies, so a user moved by the bot or by another run is
// skipped; it never waits for a row the bot holds locked (that user is
// skipped as "locked" and handled by a later run); messages go in under
// idempotency keys the queue's unique index enforces; and runs of the same
// job take turns on a lease (the run's row), so a second run waits for the
// first and then finds nothing left to do. No job holds more than the
// chunks in flight, however many users there are.
package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// DailyJob is the daily job's name: in summaries, logs, engagement_job_runs
// and the application_name of its connections.
const DailyJob = "engagement-daily"

// RunDaily runs the daily job: one step per timer of the state machine's
// table (statemachine.Timers: a transition with a Clock and a Wait), in the
// order of its triggers. Each step moves the users in the timer's
// from-states whose clock plus wait has come at the run's as-of along the
// timer's row, queueing the kind the row queues (statemachine.Kinds), and
// logs every move. DailySteps describes them, for the help and the docs.
//
// A timer whose clock is a time on the user's row (last activity,
// remind_at, the state's entry) runs the generic statement
// queries/daily_timer.sql; one with rules of its own has its own,
// queries/daily_<trigger>.sql (see dailySteps):
//
//   - inactivity_14d: one goodbye per UTC day at most, and users with no
//     JID to send it to are left as they are (goodbye_sent_at = as-of,
//     goodbye_expires_at = as-of + 48 h, the earliest it can expire);
//     cfg.Holdout's users take the same move with no goodbye queued,
//     logged with holdout = true (see Holdout);
//   - goodbye_timeout: its clock is the goodbye's delivery, in the queue; a
//     goodbye that failed for good or was cancelled moves its user back to
//     active instead (goodbye_undelivered, goodbye_expires_at = as-of:
//     their next goodbye comes the next UTC day).
//
// Whether a user's deadline has come is decided by the SQL functions of
// migrations 29, 41 and 42 (engagement_inactivity_due,
// engagement_goodbye_due, engagement_clock) with sm.DeadlineArgs, the same
// that verify's no_user_stuck asks: a user verify reports is one this job
// would have moved a day before.
//
// Opted-out users are never messaged: inactivity skips them, and other
// timers complete silently. Both count as skipped. The returned summary is
// complete even when a user failed; an error means the run stopped
// (database gone, lock or schema trouble) and the summary holds what was
// done until then.
func RunDaily(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	asOf := cfg.AsOf.UTC()
	sum := &Summary{Job: DailyJob, AsOf: asOf, DryRun: cfg.DryRun, Errors: []UserError{}}
	args := sqlfile.Shared{
		"as_of":              asOf,
		"goodbye_expires_at": asOf.Add(sm.GoodbyeTimeout.Wait()),
		"send_reminder":      cfg.SendReminder,
	}
	steps, err := dailySteps(asOf, cfg)
	if err != nil {
		return nil, err
	}
	err = runJob(ctx, pool, DailyJob, steps, args, cfg, sum)
	return sum, err
}

// DailySteps describes the daily job's steps, in the order it runs them,
// one line each ("inactivity_14d: active, help_flow -> goodbye_sent
// 14 days after the last activity, queueing goodbye"), from the state
// machine's table: for engagement-daily's help and the reference.
func DailySteps() []string {
	var out []string
	for _, t := range sm.Timers() {
		var from []string
		for _, f := range t.FromStates() {
			from = append(from, string(f))
		}
		line := fmt.Sprintf("%s: %s -> %s %s", t.Trigger, strings.Join(from, ", "), t.To, t.When())
		if k, ok := sm.KindFiredBy(t.Trigger); ok {
			if k.OnRequest {
				line += fmt.Sprintf(", queueing %s with --send-reminder", k.Message)
			} else {
				line += fmt.Sprintf(", queueing %s", k.Message)
			}
		}
		out = append(out, line)
	}
	return out
}

// genericStep is the statement of a timer on a clock of the user's row
// that has none of its own.
const genericStep = "daily_timer"

// dailySteps builds the daily steps of a run as of asOf: one per timer of
// the state machine (statemachine.Timers), in their order, each with the
// statement queries/daily_<trigger>.sql when the timer has its own, else
// the generic daily_timer.sql, which a timer on a clock
// that is not on the user's row cannot use. cfg.SendReminder makes a kind
// queued on request (the reminder) queued; cfg.Holdout is the goodbye's
// control group, the inactivity step's @holdout_basis_points and
// @holdout_salt, and cfg.Variants its copy variants, @variant_names and
// @variant_keys.
func dailySteps(asOf time.Time, cfg Config) ([]step, error) {
	var steps []step
	files := sqlfile.Names(queryFiles)
	for _, t := range sm.Timers() {
		file := "daily_" + string(t.Trigger)
		if !slices.Contains(files, file) {
			if !t.Clock.OnUserRow() {
				return nil, fmt.Errorf("daily step %s: its clock %q is not on the user's row, so it needs a statement of its own, queries/%s.sql",
					t.Trigger, t.Clock, file)
			}
			file = genericStep
		}
		st, err := transitionStep(t, file, asOf, cfg.SendReminder)
		if err != nil {
			return nil, err
		}
		if t.Trigger == sm.Inactivity14d {
			maps.Copy(st.args, cfg.Holdout.args())
			maps.Copy(st.args, variantArgs(cfg.Variants[string(goodbye.Message)]))
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// transitionStep is the step that fires timer t, with the statement of
// file: the move (users of one chunk, their message when the transition
// queues one, and their log rows, in one statement, so a user's state,
// message and log row commit together or not at all), which with @dry_run
// is also its dry run.
//
// Everything the statements need to know of the transition comes from the
// state machine's tables, as parameters: its states and trigger
// (@from_state, the row's; @from_states, every state the table moves to
// the same state on the trigger; @to_state; @trigger), its clock and wait
// (@clock, @wait, and sm.DeadlineArgs) and the kind it queues
// (statemachine.Kinds: @queue, @message_type, @message_key, @key_infix
// and, for a kind whose period is the run's, @key_suffix and the period
// [@period_start, @replay_until) holding asOf; NULL for a kind whose
// period is its user's own instant). A kind makes it a message step,
// unless the kind is queued on request and sendReminder is off.
func transitionStep(t sm.Transition, file string, asOf time.Time, sendReminder bool) (step, error) {
	var from []string
	for _, f := range t.FromStates() {
		from = append(from, string(f))
	}
	args := sqlfile.Shared(sm.DeadlineArgs())
	maps.Copy(args, sqlfile.Shared{
		"from_state":   string(t.From),
		"from_states":  from,
		"to_state":     string(t.To),
		"trigger":      string(t.Trigger),
		"clock":        string(t.Clock),
		"wait":         t.Wait,
		"queue":        false,
		"message_type": nil, "message_key": nil, "key_infix": "",
		"key_suffix": nil, "period_start": nil, "replay_until": nil,
	})
	st := step{name: string(t.Trigger), args: args, moveSQL: query(file)}
	if k, ok := sm.KindFiredBy(t.Trigger); ok {
		args["message_type"], args["message_key"], args["key_infix"] = string(k.Message), k.CatalogKey, k.KeyInfix
		if k.Period != sm.PerInstant {
			args["key_suffix"] = k.KeySuffix(asOf)
			args["period_start"], args["replay_until"] = k.Period.Bounds(asOf)
		}
		if !k.OnRequest || sendReminder {
			// Counted as a message step: duplicates are the users moved
			// without a new message (queued already, opted out, or
			// without a destination).
			st.messageType = string(k.Message)
			args["queue"] = true
		}
	}
	if t.Trigger == sm.GoodbyeTimeout {
		// The same statement moves a user whose goodbye never arrived
		// along the table's undelivered row, and finds the goodbye by its
		// key.
		u, err := sm.Next(t.From, sm.GoodbyeUndelivered)
		if err != nil {
			return step{}, fmt.Errorf("daily step %s: %w", t.Trigger, err)
		}
		args["undelivered_to_state"], args["undelivered_trigger"] = string(u.To), string(u.Trigger)
		args["key_infix"] = goodbye.KeyInfix
	}
	return st, nil
}

// goodbye is the goodbye's kind: the daily job's own message.
var goodbye, _ = sm.KindOf(sm.GoodbyeMessage)

// ForecastDaily counts what a daily run as of asOf would do to the
// database as it is now, from db: the daily job's own move statements with
// their writes switched off (@dry_run), step by step in run order, writing
// and locking nothing. It is a run's --dry-run without the run: the
// operator console asks it for each of the coming days, engagementctl
// status for the week's goodbyes. db must be a transaction that is not
// READ ONLY, on the primary (PostgreSQL refuses a statement that could
// write in a read-only transaction or on a standby, even one that writes
// nothing); roll it back. It counts no holdout (the console does not know
// the job's --holdout-percent): its goodbyes are an upper bound.
func ForecastDaily(ctx context.Context, db postgres.Querier, asOf time.Time) (Steps, error) {
	asOf = asOf.UTC()
	args := sqlfile.Shared{
		"as_of":              asOf,
		"goodbye_expires_at": asOf.Add(sm.GoodbyeTimeout.Wait()),
		"send_reminder":      false,
		"shard_index":        0,
		"shard_count":        1,
	}
	steps, err := dailySteps(asOf, Config{})
	if err != nil {
		return nil, err
	}
	out := make(Steps, 0, len(steps))
	for _, st := range steps {
		counts, err := dryRunStep(ctx, db, st, withArgs(args, st.args))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
		out = append(out, Step{Name: st.name, Counts: counts})
	}
	return out, nil
}
