package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/sender"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// MaxExamples bounds Check.Examples; Check.Violations counts every one.
const MaxExamples = 20

// The invariants Verify checks, by name (the report's check names are a
// public contract: scripts may match on them).
const (
	CheckGoodbyeQueued      = "goodbye_queued"
	CheckOneGoodbyePerDay   = "one_goodbye_per_day"
	CheckOneReviewPerWeek   = "one_review_per_week"
	CheckNoExpiredClaims    = "no_expired_claims"
	CheckTransitionsAllowed = "transitions_allowed"
	CheckLogMatchesState    = "log_matches_state"
	CheckStateTimestamps    = "state_timestamps"
)

// VerifyConfig configures Verify.
type VerifyConfig struct {
	// AsOf is the instant treated as now (claim deadlines, retention); the
	// database clock when zero.
	AsOf time.Time
	// Retention is the cleanup retention (engagementctl cleanup
	// --older-than): a goodbye whose day ended before AsOf − Retention may
	// have been deleted, so its absence is not a violation.
	// sender.DefaultRetention when 0.
	Retention time.Duration
}

// Report is the outcome of Verify: every check, passed or not.
type Report struct {
	AsOf      time.Time `json:"as_of"`
	Retention string    `json:"retention"`
	// OK is true when every invariant holds.
	OK bool `json:"ok"`
	// Broken names the checks that failed, in check order.
	Broken []string `json:"broken"`
	Checks []Check  `json:"checks"`
}

// Check is one invariant's result.
type Check struct {
	Name string `json:"name"`
	// Rule states the invariant in one sentence.
	Rule string `json:"rule"`
	OK   bool   `json:"ok"`
	// Violations counts the rows (users, messages, transitions, or user
	// and day pairs) that break the rule.
	Violations int64 `json:"violations"`
	// Examples lists up to MaxExamples of them: ids, with what is wrong.
	Examples []string `json:"examples"`
	// Exempt counts rows that would look like violations but the rule
	// excuses (see Rule); informational.
	Exempt int64 `json:"exempt,omitempty"`
}

// invariant is one check: sql selects its suspicious rows as (example text,
// exempt boolean); the rows that are not exempt are violations.
type invariant struct {
	name, rule, sql string
}

// onePerPeriod is the check that no user has two messageType messages (any
// status but cancelled) for one period: the period_start the job stored
// when it queued the message or, for a message without one (no key, or
// queued by the bot), the start of the unit ('day' or 'week', ISO) of its
// scheduled_for in UTC; format prints it in examples. It reads the rows,
// not the unique index, so it holds even where that index is gone.
func onePerPeriod(name, messageType, plural, period, unit, format string) invariant {
	return invariant{
		name: name,
		rule: fmt.Sprintf("no user has two %s (any status but cancelled) for one %s, the %s the one the message was "+
			"queued for or, without one, that of scheduled_for in UTC; checked from the rows, not the unique index",
			plural, period, period),
		sql: fmt.Sprintf(`
			SELECT user_id::text || ' ' || to_char(period AT TIME ZONE 'UTC', '%s') || ' (' || count(*) || ' %s)', false
			  FROM (SELECT user_id,
			               coalesce(period_start,
			                        date_trunc('%s', scheduled_for AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') AS period
			          FROM engagement_message_queue
			         WHERE message_type = '%s' AND status <> 'cancelled') m
			 GROUP BY user_id, period
			HAVING count(*) > 1`, format, plural, unit, messageType),
	}
}

var invariants = []invariant{
	{
		name: CheckGoodbyeQueued,
		rule: "every goodbye_sent user whose latest logged transition put them in goodbye_sent has a queued goodbye " +
			"(any status: one cancelled at send time or by an operator was queued too) for the UTC day of goodbye_sent_at; exempt: users with no such log row (the bot or an " +
			"import set the state), no goodbye_sent_at (see state_timestamps), or a goodbye day that ended before " +
			"as-of minus the retention (cleanup may have deleted it)",
		sql: `
			SELECT s.user_id::text,
			       l.to_state IS DISTINCT FROM 'goodbye_sent'
			       OR s.goodbye_sent_at IS NULL
			       OR ((s.goodbye_sent_at AT TIME ZONE 'UTC')::date + 1)::timestamp AT TIME ZONE 'UTC' < @cutoff
			  FROM user_engagement_states s
			  LEFT JOIN LATERAL (
			       SELECT l.to_state FROM engagement_state_transitions l
			        WHERE l.user_id = s.user_id
			        ORDER BY l.id DESC LIMIT 1
			  ) l ON true
			 WHERE s.state = 'goodbye_sent'
			   AND NOT EXISTS (
			       SELECT 1 FROM engagement_message_queue q
			        WHERE q.user_id = s.user_id AND q.message_type = 'goodbye'
			          AND q.period_start = date_trunc('day', s.goodbye_sent_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')`,
	},
	onePerPeriod(CheckOneGoodbyePerDay, sender.TypeGoodbye, "goodbyes", "UTC day", "day", "YYYY-MM-DD"),
	onePerPeriod(CheckOneReviewPerWeek, sender.TypeWeeklyReview, "reviews", "ISO week", "week", `IYYY-"W"IW`),
	{
		name: CheckNoExpiredClaims,
		rule: "no message is in flight (processing) past its claim deadline (claimed_until before as-of, or none); " +
			"the next queue-process settles such claims from its send ledger",
		sql: `
			SELECT id::text, false FROM engagement_message_queue
			 WHERE status = 'processing' AND (claimed_until < @as_of OR claimed_until IS NULL)`,
	},
	{
		name: CheckTransitionsAllowed,
		rule: "every logged transition (from_state, trigger, to_state) is a row of the state machine's transition table",
		sql: `
			SELECT 'transition ' || l.id || ' of ' || l.user_id || ': ' || l.from_state || ' -' || l.trigger || '-> ' || l.to_state, false
			  FROM engagement_state_transitions l
			 WHERE NOT EXISTS (
			       SELECT 1 FROM unnest(@allowed_from::text[], @allowed_trigger::text[], @allowed_to::text[]) AS a (f, t, d)
			        WHERE a.f = l.from_state AND a.t = l.trigger AND a.d = l.to_state)`,
	},
	{
		name: CheckLogMatchesState,
		rule: "a user's latest logged transition leads to their current state, unless the state changed after that " +
			"transition: the state row was updated after the transition's time, or its state was changed after the " +
			"log row was written by a transaction that began before the transition's and stamped updated_at no earlier " +
			"than its own start (the bot moved them in a transaction that overlapped the job's); " +
			"users with no logged transition are not checked",
		// updated_at alone cannot order a bot's write against the job's: the
		// bot stamps its transaction's now(), which is earlier than the
		// transition's when its transaction began first, though it wrote
		// later. state_changed_at / logged_at (migration 15, physical write
		// times) order the writes; NULL (rows from before it) falls back to
		// the updated_at comparison alone.
		sql: `
			SELECT s.user_id::text || ' (state ' || s.state || ', log says ' || l.to_state || ')', false
			  FROM (SELECT DISTINCT ON (user_id) user_id, to_state, created_at, coalesce(logged_at, created_at) AS logged_at
			          FROM engagement_state_transitions
			         ORDER BY user_id DESC, id DESC) l
			  JOIN user_engagement_states s ON s.user_id = l.user_id
			 WHERE s.state <> l.to_state
			   AND s.updated_at <= l.created_at
			   AND NOT coalesce(s.state_changed_at > l.logged_at
			                    AND s.state_changed_xact_at < l.created_at
			                    AND s.updated_at >= s.state_changed_xact_at, false)`,
	},
	{
		name: CheckStateTimestamps,
		rule: "goodbye_sent users have goodbye_sent_at and remind_later users have remind_at; " +
			"without them the daily job can never move the user on",
		sql: `
			SELECT s.user_id::text || ' (' || s.state || ' without ' ||
			       CASE s.state WHEN 'goodbye_sent' THEN 'goodbye_sent_at' ELSE 'remind_at' END || ')', false
			  FROM user_engagement_states s
			 WHERE (s.state = 'goodbye_sent' AND s.goodbye_sent_at IS NULL)
			    OR (s.state = 'remind_later' AND s.remind_at IS NULL)`,
	},
}

// Verify checks the scheduler's invariants from one read-only snapshot and
// reports every check. Each check is one set-based query over the tables
// (the largest scan the queue's goodbyes and reviews, or the transition
// log); nothing is read per user. An error means the checks could not run;
// a broken invariant is a report with OK false.
func Verify(ctx context.Context, pool *pgxpool.Pool, cfg VerifyConfig) (*Report, error) {
	retention := cmp.Or(cfg.Retention, sender.DefaultRetention)
	if retention < 0 {
		return nil, fmt.Errorf("retention must be positive, got %s", retention)
	}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("begin the verify snapshot: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	asOf, err := resolveAsOf(ctx, tx, cfg.AsOf)
	if err != nil {
		return nil, err
	}

	var from, trigger, to []string
	for _, t := range sm.Transitions() {
		from, trigger, to = append(from, string(t.From)), append(trigger, string(t.Trigger)), append(to, string(t.To))
	}
	args := pgx.NamedArgs{
		"as_of":           asOf,
		"cutoff":          asOf.Add(-retention),
		"max_examples":    MaxExamples,
		"allowed_from":    from,
		"allowed_trigger": trigger,
		"allowed_to":      to,
	}

	rep := &Report{AsOf: asOf, Retention: retention.String(), OK: true, Broken: []string{}}
	for _, inv := range invariants {
		c := Check{Name: inv.name, Rule: inv.rule}
		err := tx.QueryRow(ctx, `
			WITH found AS MATERIALIZED (`+inv.sql+`), v AS (SELECT * FROM found AS f (example, exempt))
			SELECT count(*) FILTER (WHERE NOT exempt),
			       count(*) FILTER (WHERE exempt),
			       coalesce((SELECT array_agg(example ORDER BY example)
			                   FROM (SELECT example FROM v WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
			                '{}')
			  FROM v`, args).Scan(&c.Violations, &c.Exempt, &c.Examples)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", inv.name, err)
		}
		c.OK = c.Violations == 0
		if !c.OK {
			rep.OK = false
			rep.Broken = append(rep.Broken, c.Name)
		}
		rep.Checks = append(rep.Checks, c)
	}
	return rep, nil
}
