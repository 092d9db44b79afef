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
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/sender"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// DailyJob is the daily job's name: in summaries, logs, engagement_job_runs
// and the application_name of its connections.
const DailyJob = "engagement-daily"

// RunDaily runs the daily job's three steps, in this order:
//
//  1. inactivity_14d: active (and help_flow) users silent for 14 days get
//     the goodbye message queued and move to goodbye_sent (goodbye_sent_at
//     = as-of, goodbye_expires_at = as-of + 48 h, the earliest it can
//     expire);
//  2. goodbye_timeout: goodbyes unanswered for 48 h after they were
//     delivered move to dormant; a goodbye that failed for good or was
//     cancelled moves its user back to active (goodbye_undelivered);
//  3. reminder_due: remind_later users whose remind_at has come move to
//     dormant (with cfg.SendReminder, their reminder is queued).
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
	day, dayEnd := sender.GoodbyePeriod(asOf)
	sum := &Summary{Job: DailyJob, AsOf: asOf, DryRun: cfg.DryRun, Errors: []UserError{}}
	args := pgx.NamedArgs{
		"as_of":               asOf,
		"inactive_before":     asOf.Add(-sm.InactivityPeriod),
		"goodbye_sent_before": asOf.Add(-sm.GoodbyeWindow),
		"goodbye_expires_at":  asOf.Add(sm.GoodbyeWindow),
		"key_suffix":          sender.GoodbyeKeySuffix(asOf),
		"period_start":        day,
		"replay_until":        dayEnd,
		"unknown_prefix":      unknownPrefix,
		"send_reminder":       cfg.SendReminder,
	}
	steps, err := dailySteps(cfg.SendReminder)
	if err != nil {
		return nil, err
	}
	err = runJob(ctx, pool, DailyJob, steps, args, cfg, sum)
	return sum, err
}

// unknownPrefix starts the error_message of a message whose send may have
// reached the receiver (sender.ErrOutcomeUnknown): a goodbye in doubt
// counts as delivered for its timeout.
var unknownPrefix = strings.SplitN(sender.ErrOutcomeUnknown.Error(), ":", 2)[0]

// dailyStepFiles are the daily job's steps, in order: each is the state
// machine's transition from a state on a time trigger, and a statement file
// (queries/<file>.sql, with <file>_dry_run.sql for dry runs) that moves a
// chunk's users along it. The files take the transition's states and
// trigger as parameters, from the table (step_test.go checks each file
// against it).
var dailyStepFiles = []struct {
	from    sm.State
	trigger sm.Trigger
	file    string
}{
	{sm.Active, sm.Inactivity14d, "daily_inactivity_14d"},
	{sm.GoodbyeSent, sm.GoodbyeTimeout, "daily_goodbye_timeout"},
	{sm.RemindLater, sm.ReminderDue, "daily_reminder_due"},
}

// dailySteps builds the daily steps from the state machine's table;
// sendReminder makes reminder_due queue reminders.
func dailySteps(sendReminder bool) ([]step, error) {
	steps := make([]step, 0, len(dailyStepFiles))
	for _, d := range dailyStepFiles {
		st, err := transitionStep(d.from, d.trigger, d.file)
		if err != nil {
			return nil, err
		}
		if d.trigger == sm.ReminderDue && sendReminder {
			// Counted as a message step: duplicates are the users moved
			// without a new reminder (queued already, opted out, or
			// without a destination).
			st.messageType = sender.TypeReminder
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// transitionStep is the step that fires trigger on users in state from,
// with the statements of file: the move (users of one chunk, their
// message when the transition queues one, and their log rows, in one
// statement, so a user's state, message and log row commit together or not
// at all) and its dry run. The transition's states and trigger are the
// statements' @from_state, @to_state and @trigger.
func transitionStep(from sm.State, trigger sm.Trigger, file string) (step, error) {
	t, err := sm.Next(from, trigger)
	if err != nil {
		return step{}, fmt.Errorf("daily step %s: %w", trigger, err)
	}
	args := pgx.NamedArgs{
		"from_state":  string(t.From),
		"from_states": fromStates(t),
		"to_state":    string(t.To),
		"trigger":     string(t.Trigger),
	}
	st := step{name: string(trigger), args: args, dryRunSQL: query(file + "_dry_run"), moveSQL: query(file)}
	switch trigger {
	case sm.Inactivity14d:
		st.messageType = sender.TypeGoodbye
		args["message_type"], args["message_key"] = sender.TypeGoodbye, sender.KeyGoodbye
	case sm.GoodbyeTimeout:
		// The same statement moves a user whose goodbye never arrived
		// along the table's undelivered row, and finds the goodbye by its
		// key.
		u, err := sm.Next(from, sm.GoodbyeUndelivered)
		if err != nil {
			return step{}, fmt.Errorf("daily step %s: %w", trigger, err)
		}
		args["undelivered_to_state"], args["undelivered_trigger"] = string(u.To), string(u.Trigger)
		args["key_infix"] = goodbyeKeyInfix
	case sm.ReminderDue:
		// Queues only with send_reminder (see dailySteps).
		args["message_type"], args["message_key"] = sender.TypeReminder, sender.KeyReminder
		args["key_infix"] = reminderKeyInfix
	}
	return st, nil
}

// The keys' middles: {userId}:goodbye_sent:{day}, {userId}:reminder:{ms}.
var (
	goodbyeKeyInfix  = strings.TrimSuffix(sender.GoodbyeKeySuffix(time.Time{}), "0001-01-01")
	reminderKeyInfix = strings.TrimSuffix(sender.ReminderKey("", time.UnixMilli(0)), "0")
)

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
