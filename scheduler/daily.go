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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/sender"
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
//     active instead (goodbye_undelivered, goodbye_expires_at = as-of),
//     opted out or not: a goodbye that never arrived never times anyone
//     out to dormant (a 131050 included). Late failures are not retried
//     blindly: the next goodbye waits by the failure's WhatsApp code and
//     the count of goodbyes in a row that failed since the user last
//     wrote (statemachine.BackoffArgs; goodbye_failures and
//     goodbye_retry_at on the user's row, migration 67): 131049, Meta's
//     per-user marketing limit, 2, 4, 8, 16 days; 131026 and any other
//     code or none 7, 14, 28 days; then no goodbye until the user writes.
//     A cancelled goodbye or a 131050 (the user is opted out) sets no
//     wait: the next UTC day, as before.
//
// Whether a user's deadline has come is decided by the SQL functions of
// migrations 29, 41 and 42 (engagement_inactivity_due,
// engagement_goodbye_due, engagement_clock) with sm.DeadlineArgs, the same
// that verify's no_user_stuck asks: a user verify reports is one this job
// would have moved a day before.
//
// Opted-out users are never messaged: inactivity skips them, and other
// timers complete silently (goodbye_timeout by what became of the goodbye:
// an undelivered one sends them back to active, never to dormant). Both count as skipped. The returned summary is
// complete even when a user failed; an error means the run stopped
// (database gone, lock or schema trouble) and the summary holds what was
// done until then.
func RunDaily(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	asOf := cfg.AsOf.UTC()
	sum := &Summary{Job: DailyJob, AsOf: asOf, DryRun: cfg.DryRun, Errors: []UserError{}}
	steps, err := dailySteps(asOf, cfg)
	if err != nil {
		return nil, err
	}
	err = runJob(ctx, pool, DailyJob, steps, cfg, sum)
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

// dailySteps builds the daily steps of a run as of asOf: one per timer of
// the state machine (statemachine.Timers), in their order. A timer with
// rules of its own runs its own statement, queries/daily_<trigger>.sql;
// every other timer, whose clock is a time on the user's row, the generic
// queries/daily_timer.sql, which a timer on a clock that is not on the
// user's row cannot use. A step queues the kind its trigger fires
// (statemachine.Kinds), unless the kind is queued on request and
// cfg.SendReminder is off; cfg.Holdout and cfg.Variants are the goodbye's
// (see inactivityMove).
//
// Each step's statement moves the users of one chunk, queues their
// message when the transition queues one, and logs their moves, in one
// statement, so a user's state, message and log row commit together or
// not at all; with @dry_run it is also its dry run. Everything it needs to
// know of the transition comes from the state machine's tables, as
// parameters: its states and trigger, its clock and wait (with
// statemachine.DeadlineArgs), and its kind.
func dailySteps(asOf time.Time, cfg Config) ([]step, error) {
	var steps []step
	m := cfg.Machine
	for _, t := range m.Timers() {
		st := step{name: string(t.Trigger)}
		if k, ok := m.KindFiredBy(t.Trigger); ok && (!k.OnRequest || cfg.SendReminder) {
			// Counted as a message step: duplicates are the users moved
			// without a new message (queued already, opted out, or
			// without a destination).
			st.messageType = string(k.Message)
		}
		switch {
		case t.Trigger == sm.Inactivity14d:
			st.move = inactivityMove(m, t, asOf, cfg.Holdout, cfg.BestHour, cfg.Variants[string(goodbye.Message)])
		case t.Trigger == sm.GoodbyeTimeout:
			// The same statement moves a user whose goodbye never arrived
			// along the table's undelivered row.
			undelivered, err := m.Next(t.From, sm.GoodbyeUndelivered)
			if err != nil {
				return nil, fmt.Errorf("daily step %s: %w", t.Trigger, err)
			}
			st.move = goodbyeTimeoutMove(m, t, undelivered, asOf)
		case t.Clock.OnUserRow():
			st.move = timerMove(m, t, asOf, st.messageType != "")
		default:
			return nil, fmt.Errorf("daily step %s: its clock %q is not on the user's row, so it needs a statement of its own, queries/daily_%s.sql",
				t.Trigger, t.Clock, t.Trigger)
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// inactivityMove is inactivity_14d's statement,
// queries/daily_inactivity_14d.sql: timer t moves its users from any of
// its from-states (@from_states: every state the table moves to the same
// state on the trigger) once silent for @inactivity, and queues their
// goodbye, the kind it fires, under the key of asOf's UTC day
// (@key_suffix, the period [@period_start, @replay_until)), with
// goodbye_expires_at as-of + the goodbye's 48 hours. holdout is the
// goodbye's control group (@holdout_basis_points, @holdout_salt), best the
// user's hour (@best_hour_basis_points, @best_hour_salt, @quiet_start,
// @quiet_end, @timezone), and variants its copy variants (@variant_names,
// @variant_keys). machine is the state machine t is a timer of.
func inactivityMove(machine sm.Machine, t sm.Transition, asOf time.Time, holdout Holdout, best BestHour, variants []sender.Variant) mover {
	deadlines, from := machine.DeadlineArgs(), stateNames(machine.FromStates(t))
	quietStart, quietEnd := best.quiet()
	day, dayEnd := goodbye.Period.Bounds(asOf)
	variantNames, variantKeys := variantArgs(variants)
	return moveBy(dailyInactivity14dQuery, func(m moveArgs) dailyInactivity14dArgs {
		return dailyInactivity14dArgs{
			AsOf: asOf, FromStates: from, ToState: string(t.To), Trigger: string(t.Trigger),
			Inactivity: deadlines.Inactivity, GoodbyeExpiresAt: asOf.Add(deadlines.GoodbyeWindow),
			MessageType: string(goodbye.Message), MessageKey: goodbye.CatalogKey,
			KeySuffix: goodbye.KeySuffix(asOf), PeriodStart: day, ReplayUntil: dayEnd,
			HoldoutBasisPoints: holdout.BasisPoints(), HoldoutSalt: holdout.salt(),
			BestHourBasisPoints: best.basisPoints(), BestHourSalt: BestHourSalt,
			QuietStart: quietStart, QuietEnd: quietEnd, Timezone: best.timezone(),
			VariantNames: variantNames, VariantKeys: variantKeys,
			First: m.first, End: m.end, ShardIndex: m.shardIndex, ShardCount: m.shardCount,
			RunID: m.runID, DryRun: m.dryRun, LogDuplicates: m.logDuplicates,
		}
	})
}

// goodbyeTimeoutMove is goodbye_timeout's statement,
// queries/daily_goodbye_timeout.sql: timer t moves its users from its
// from-state (@from_state) once their goodbye, found by its key
// (@key_infix), was delivered @goodbye_window ago; a user whose goodbye
// failed for good or was cancelled takes the table's undelivered row
// instead (@undelivered_to_state, @undelivered_trigger), and a failure
// sets when their next goodbye may go by its code (sm.BackoffArgs: the
// schedules and the codes they tell apart). Nothing is queued.
// machine is the state machine t is a timer of.
func goodbyeTimeoutMove(machine sm.Machine, t, undelivered sm.Transition, asOf time.Time) mover {
	deadlines, backoff := machine.DeadlineArgs(), sm.BackoffArgs()
	return moveBy(dailyGoodbyeTimeoutQuery, func(m moveArgs) dailyGoodbyeTimeoutArgs {
		return dailyGoodbyeTimeoutArgs{
			AsOf: asOf, FromState: string(t.From), ToState: string(t.To), Trigger: string(t.Trigger),
			GoodbyeWindow: deadlines.GoodbyeWindow, KeyInfix: goodbye.KeyInfix,
			UndeliveredToState: string(undelivered.To), UndeliveredTrigger: string(undelivered.Trigger),
			EcosystemLimitCode: backoff.EcosystemLimitCode, EcosystemLimitBackoff: backoff.EcosystemLimit,
			UndeliverableBackoff: backoff.Undeliverable, MarketingStoppedCode: backoff.MarketingStoppedCode,
			UntilUserWrites: backoff.UntilTheUserWrites,
			First:           m.first, End: m.end, ShardIndex: m.shardIndex, ShardCount: m.shardCount,
			RunID: m.runID, DryRun: m.dryRun,
		}
	})
}

// timerMove is the statement of a timer on a clock of the user's row
// without one of its own, queries/daily_timer.sql: timer t moves its users
// from any of its from-states (@from_states) once its clock plus its wait
// (@clock, @wait) has come, and, when queue is set, queues the kind it
// fires (@message_type, @message_key) under the key of the kind's period
// holding asOf (@key_infix, @key_suffix, [@period_start, @replay_until))
// or, for a kind whose period is its user's own instant, of that instant
// (the three NULL). machine is the state machine t is a timer of.
func timerMove(machine sm.Machine, t sm.Transition, asOf time.Time, queue bool) mover {
	var (
		messageType, messageKey, keySuffix *string
		keyInfix                           string
		periodStart, replayUntil           *time.Time
	)
	from := stateNames(machine.FromStates(t))
	if k, ok := machine.KindFiredBy(t.Trigger); ok {
		messageType, messageKey, keyInfix = ptr(string(k.Message)), &k.CatalogKey, k.KeyInfix
		if k.Period != sm.PerInstant {
			start, end := k.Period.Bounds(asOf)
			keySuffix, periodStart, replayUntil = ptr(k.Period.Label(asOf)), &start, &end
		}
	}
	return moveBy(dailyTimerQuery, func(m moveArgs) dailyTimerArgs {
		return dailyTimerArgs{
			AsOf: asOf, FromStates: from, ToState: string(t.To), Trigger: string(t.Trigger),
			Clock: string(t.Clock), Wait: t.Wait,
			Queue: queue, MessageType: messageType, MessageKey: messageKey,
			KeyInfix: keyInfix, KeySuffix: keySuffix, PeriodStart: periodStart, ReplayUntil: replayUntil,
			First: m.first, End: m.end, ShardIndex: m.shardIndex, ShardCount: m.shardCount,
			RunID: m.runID, DryRun: m.dryRun, LogDuplicates: m.logDuplicates,
		}
	})
}

func ptr[T any](v T) *T { return &v }

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
// the job's --holdout-percent): its goodbyes are an upper bound. machine
// is the state machine whose timers it runs (statemachine.Default, the
// binaries').
func ForecastDaily(ctx context.Context, db postgres.Querier, asOf time.Time, machine sm.Machine) (Steps, error) {
	asOf = asOf.UTC()
	steps, err := dailySteps(asOf, Config{Machine: machine})
	if err != nil {
		return nil, err
	}
	out := make(Steps, 0, len(steps))
	for _, st := range steps {
		counts, err := dryRunStep(ctx, db, st, moveArgs{shardIndex: 0, shardCount: 1})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
		out = append(out, Step{Name: st.name, Counts: counts})
	}
	return out, nil
}
