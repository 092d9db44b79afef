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

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// DailyJob is the daily job's name: in summaries, logs, engagement_job_runs
// and the application_name of its connections.
const DailyJob = "engagement-daily"

// RunDaily runs the daily job's steps: one per scheduler trigger of the
// state machine that has a statement file, queries/daily_<trigger>.sql
// (see dailySteps), in the order of statemachine.Triggers:
//
//  1. inactivity_14d: active (and help_flow) users silent for 14 days get
//     the goodbye message queued and move to goodbye_sent (goodbye_sent_at
//     = as-of, goodbye_expires_at = as-of + 48 h, the earliest it can
//     expire), one goodbye per UTC day at most;
//  2. goodbye_timeout: goodbyes unanswered for 48 h after they were
//     delivered move to dormant; a goodbye that failed for good or was
//     cancelled moves its user back to active (goodbye_undelivered,
//     goodbye_expires_at = as-of: their next goodbye comes the next UTC
//     day);
//  3. reminder_due: remind_later users whose remind_at has come move to
//     dormant (with cfg.SendReminder, their reminder is queued).
//
// Whether a user's deadline has come is decided by the deadline functions
// of migration 29 (engagement_inactivity_due, engagement_goodbye_due,
// engagement_reminder_due) with DeadlineArgs, the same that verify's
// no_user_stuck asks: a user verify reports is one this job would have
// moved a day before.
//
// Opted-out users are never messaged: the first step skips them, and their
// timers (steps 2 and 3) complete silently. Users with no JID to send the
// goodbye to are left as they are. Both count as skipped. The returned
// summary is complete even when a user failed; an error means the run
// stopped (database gone, lock or schema trouble) and the summary holds what
// was done until then.
func RunDaily(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	asOf := cfg.AsOf.UTC()
	sum := &Summary{Job: DailyJob, AsOf: asOf, DryRun: cfg.DryRun, Errors: []UserError{}}
	args := sqlfile.Args{
		"as_of":              asOf,
		"goodbye_expires_at": asOf.Add(sm.GoodbyeWindow),
		"send_reminder":      cfg.SendReminder,
	}
	steps, err := dailySteps(asOf, cfg.SendReminder)
	if err != nil {
		return nil, err
	}
	err = runJob(ctx, pool, DailyJob, steps, args, cfg, sum)
	return sum, err
}

// unknownPrefix starts the error_message of a message whose send may have
// reached the receiver (delivery.ErrOutcomeUnknown): a goodbye in doubt
// counts as delivered for its timeout.
var unknownPrefix = strings.SplitN(delivery.ErrOutcomeUnknown.Error(), ":", 2)[0]

// DeadlineArgs are the parameters every caller of the deadline functions
// (migration 29) passes them, taken from the state machine: the daily job's
// statements and verify's no_user_stuck, so that both decide by one
// definition whether a user's deadline has come.
//
//   - @inactivity: inactivity_14d's wait (statemachine.InactivityPeriod);
//   - @goodbye_window: goodbye_timeout's wait (statemachine.GoodbyeWindow);
//   - @unknown_prefix: how the error of a send in doubt begins
//     (delivery.ErrOutcomeUnknown): such a goodbye may have arrived;
//   - @inactivity_states, @goodbye_states, @reminder_states: the states each
//     timer runs in, the from-states of the transition table's rows for
//     inactivity_14d, goodbye_timeout and reminder_due.
func DeadlineArgs() sqlfile.Args {
	states := func(t sm.Trigger) []string {
		var out []string
		for _, tr := range sm.Transitions() {
			if tr.Trigger == t {
				out = append(out, string(tr.From))
			}
		}
		return out
	}
	return sqlfile.Args{
		"inactivity":        sm.Inactivity14d.Wait(),
		"goodbye_window":    sm.GoodbyeTimeout.Wait(),
		"unknown_prefix":    unknownPrefix,
		"inactivity_states": states(sm.Inactivity14d),
		"goodbye_states":    states(sm.GoodbyeTimeout),
		"reminder_states":   states(sm.ReminderDue),
	}
}

// dailySteps builds the daily steps of a run as of asOf: one for each
// trigger, in the order of statemachine.Triggers, that has a statement file
// queries/daily_<trigger>.sql (and daily_<trigger>_dry_run.sql for dry
// runs) moving a chunk's users along its transition. sendReminder makes
// reminder_due queue reminders.
func dailySteps(asOf time.Time, sendReminder bool) ([]step, error) {
	var steps []step
	files := sqlfile.Names(queryFiles)
	for _, t := range sm.Triggers() {
		file := "daily_" + string(t)
		if !slices.Contains(files, file) {
			continue
		}
		st, err := transitionStep(t, file, asOf, sendReminder)
		if err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// transitionStep is the step that fires trigger, with the statements of
// file: the move (users of one chunk, their message when the transition
// queues one, and their log rows, in one statement, so a user's state,
// message and log row commit together or not at all) and its dry run.
//
// Everything the statements need to know of the transition comes from the
// state machine's tables, as parameters: its states and trigger
// (@from_state, the first row's; @from_states, every state the table moves
// to the same state on the trigger; @to_state; @trigger), the waits the
// deadline functions take (DeadlineArgs) and the kind it queues
// (statemachine.Kinds: @message_type, @message_key, @key_infix and, for a
// kind whose period is the run's, @key_suffix and the period
// [@period_start, @replay_until) holding asOf). A kind makes it a message
// step, unless the kind is queued on request and sendReminder is off.
func transitionStep(trigger sm.Trigger, file string, asOf time.Time, sendReminder bool) (step, error) {
	table := sm.Transitions()
	i := slices.IndexFunc(table, func(t sm.Transition) bool { return t.Trigger == trigger })
	if i < 0 {
		return step{}, fmt.Errorf("daily step %s: no transition of the state machine fires on it", trigger)
	}
	t := table[i]
	args := DeadlineArgs()
	maps.Copy(args, sqlfile.Args{
		"from_state":  string(t.From),
		"from_states": fromStates(t),
		"to_state":    string(t.To),
		"trigger":     string(t.Trigger),
	})
	st := step{name: string(trigger), args: args, dryRunSQL: query(file + "_dry_run"), moveSQL: query(file)}
	if k, ok := sm.KindFiredBy(trigger); ok {
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
		}
	}
	if trigger == sm.GoodbyeTimeout {
		// The same statement moves a user whose goodbye never arrived
		// along the table's undelivered row, and finds the goodbye by its
		// key.
		u, err := sm.Next(t.From, sm.GoodbyeUndelivered)
		if err != nil {
			return step{}, fmt.Errorf("daily step %s: %w", trigger, err)
		}
		args["undelivered_to_state"], args["undelivered_trigger"] = string(u.To), string(u.Trigger)
		args["key_infix"] = goodbye.KeyInfix
	}
	return st, nil
}

// goodbye is the goodbye's kind: the daily job's own message.
var goodbye, _ = sm.KindOf(sm.GoodbyeMessage)

// fromStates lists every state the table moves to t.To on t.Trigger: one
// step moves them all in one pass over the table (help_flow users who went
// silent fall back into the inactivity path with active ones).
func fromStates(t sm.Transition) []string {
	var from []string
	for _, o := range sm.Transitions() {
		if o.Trigger == t.Trigger && o.To == t.To {
			from = append(from, string(o.From))
		}
	}
	return from
}

// ForecastDaily counts what a daily run as of asOf would do to the
// database as it is now, from db (a read-only transaction is enough): the
// daily job's own dry-run statements, step by step in run order, writing
// nothing. It is a run's --dry-run without the run: the operator console
// asks it for each of the coming days.
func ForecastDaily(ctx context.Context, db postgres.Querier, asOf time.Time) (Steps, error) {
	asOf = asOf.UTC()
	args := sqlfile.Args{
		"as_of":              asOf,
		"goodbye_expires_at": asOf.Add(sm.GoodbyeWindow),
		"send_reminder":      false,
		"shard_index":        0,
		"shard_count":        1,
	}
	steps, err := dailySteps(asOf, false)
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
