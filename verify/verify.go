// Package verify checks the scheduler's invariants (engagementctl verify)
// from one read-only snapshot, each a set-based statement over the tables:
// the state machine's (transitions allowed, the log matches the state,
// nobody stuck), the queue's (one message of a kind per period, every
// goodbye queued, no abandoned claim), the profiles' (usable time zones)
// and the database's (nothing of the scheduler's reachable through
// Supabase's Data API).
package verify

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement"
	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// MaxExamples bounds Check.Examples; Check.Violations counts every one.
const MaxExamples = 20

// The invariants Run checks, by name (the report's check names are a
// public contract: scripts may match on them).
const (
	CheckGoodbyeQueued      = "goodbye_queued"
	CheckOneGoodbyePerDay   = "one_goodbye_per_day" // the goodbye kind's Check
	CheckOneReviewPerWeek   = "one_review_per_week" // the weekly review kind's Check
	CheckNoExpiredClaims    = "no_expired_claims"
	CheckTransitionsAllowed = "transitions_allowed"
	CheckLogMatchesState    = "log_matches_state"
	CheckStateTimestamps    = "state_timestamps"
	CheckNoUserStuck        = "no_user_stuck"
	CheckTimeZonesUsable    = "time_zones_usable"
	CheckDataAPIClosed      = "data_api_closed"
	CheckInstantsPlausible  = "instants_plausible"
	CheckNoSendAfterOptOut  = "no_send_after_opt_out"
	CheckNoGoodbyeToHoldout = "no_goodbye_to_holdout"
)

// OptOutGrace is how long after an opt-out a message may still be sent
// (no_send_after_opt_out): one whose send had started when the opt-out
// committed goes, and is stamped sent when its send settles, within
// queue-process's default claim timeout.
const OptOutGrace = engagement.DefaultClaimTimeout

// StuckGrace is how long past a state's deadline a user may wait before
// verify reports them stuck: the daily job runs once a day.
const StuckGrace = 24 * time.Hour

// Config configures Run.
type Config struct {
	// AsOf is the instant treated as now (claim deadlines, retention); the
	// database clock when zero.
	AsOf time.Time
	// Retention is the cleanup retention (engagementctl cleanup
	// --older-than): a goodbye whose day ended before AsOf − Retention may
	// have been deleted, so its absence is not a violation.
	// engagement.DefaultRetention when 0.
	Retention time.Duration
}

// Report is the outcome of Run: every check, passed or not.
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
	// Violations counts the rows (users, messages, transitions, user and
	// day pairs, or object and role pairs) that break the rule.
	Violations int64 `json:"violations"`
	// Examples lists up to MaxExamples of them: ids, with what is wrong.
	Examples []string `json:"examples"`
	// Exempt counts rows that would look like violations but the rule
	// excuses (see Rule); informational.
	Exempt int64 `json:"exempt,omitempty"`
}

// invariant is one check: run runs its statement (a queries/verify_*.sql),
// which finds the suspicious rows as (example, exempt) and returns how many
// are violations, how many exempt, and up to MaxExamples examples.
type invariant struct {
	name, rule string
	run        func(ctx context.Context, tx pgx.Tx, e env) (found, error)
}

// env is what every check's arguments are filled from: the run's as-of,
// the retention's cutoff, the examples' bound, the state machine's
// transition table and the daily job's deadlines.
type env struct {
	asOf, cutoff time.Time
	maxExamples  int64
	// allowedFrom, allowedTrigger and allowedTo are the transition table
	// (statemachine.Transitions), one entry per row.
	allowedFrom, allowedTrigger, allowedTo []string
	// The deadlines are the daily job's own (statemachine.DeadlineArgs):
	// verify and the job decide by one definition whether a user's
	// deadline has come.
	sm.Deadlines
}

// found is a check's outcome, the row every verify_*.sql returns.
type found struct {
	Violations int64
	Exempt     int64
	Examples   []string
}

// foundRow is the row type queries.gen.go declares for each check's
// statement: found's columns, under the statement's own name.
type foundRow interface {
	~struct {
		Violations int64
		Exempt     int64
		Examples   []string
	}
}

// check makes an invariant's run of statement s, its arguments filled by
// args from the run's env.
func check[P sqlfile.Params, R foundRow, PR sqlfile.Row[R]](s sqlfile.Statement[P, R, PR], args func(env) P) func(context.Context, pgx.Tx, env) (found, error) {
	return func(ctx context.Context, tx pgx.Tx, e env) (found, error) {
		row, err := s.One(ctx, tx, args(e))
		return found(row), err
	}
}

// stuckRule is no_user_stuck's rule, its deadlines from the state
// machine's table: "… goodbye_sent 48 h after the goodbye's delivery …".
func stuckRule() string {
	var deadlines []string
	for _, t := range sm.Timers() {
		var from []string
		for _, f := range t.FromStates() {
			from = append(from, string(f))
		}
		d := strings.Join(from, " or ") + " " + t.When()
		switch t.Trigger {
		case sm.Inactivity14d:
			d += " (not opted out; a user moved back by goodbye_undelivered gets their next goodbye the next UTC day, " +
				"or, after goodbyes that failed for good, at goodbye_retry_at: " + sm.CodeEcosystemLimit + " " +
				backoffDays(sm.EcosystemLimitBackoff) + ", any other code " + backoffDays(sm.UndeliverableBackoff) +
				", then none until they write)"
		case sm.GoodbyeTimeout:
			d += " (or, in doubt, after its last attempt), failed for good or cancelled, or, without a message " +
				"or opted out, past goodbye_expires_at"
		}
		deadlines = append(deadlines, d)
	}
	return "no user is still where the daily job would have moved them on a day before as-of, by the deadlines it " +
		"decides by (the same SQL functions, with the same parameters, from the state machine's table): " +
		strings.Join(deadlines, "; ") +
		"; exempt: users without a JID to send a goodbye to, users whose next goodbye waits after failed ones " +
		"(goodbye_retry_at), and goodbyes still waiting to be delivered"
}

// backoffDays says a backoff schedule in days: "7, 14, 28 days".
func backoffDays(waits []time.Duration) string {
	days := make([]string, len(waits))
	for i, w := range waits {
		days[i] = strconv.Itoa(int(w / (24 * time.Hour)))
	}
	return strings.Join(days, ", ") + " days"
}

// goodbye is the goodbye's kind, which two checks are about.
var goodbye, _ = sm.KindOf(sm.GoodbyeMessage)

// periodSQL is how the checks name a kind's period in SQL: its
// date_trunc unit, its to_char format and, in the rule, its name.
var periodSQL = map[sm.Period]struct{ unit, format, name string }{
	sm.PerDay:     {"day", "YYYY-MM-DD", "UTC day"},
	sm.PerISOWeek: {"week", `IYYY-"W"IW`, "ISO week"},
}

// onePerPeriod is the check that no user has two messages of kind k (any
// status but cancelled) for one period: the period_start the job stored
// when it queued the message or, for a message without one (no key, or
// queued by the bot), the start of the kind's period holding its
// scheduled_for in UTC. It reads the rows, not the unique index, so it
// holds even where that index is gone.
func onePerPeriod(k sm.Kind) invariant {
	p := periodSQL[k.Period]
	return invariant{
		name: k.Check,
		rule: fmt.Sprintf("no user has two %s (any status but cancelled) for one %s, the %s the one the message was "+
			"queued for or, without one, that of scheduled_for in UTC; checked from the rows, not the unique index",
			k.Plural, p.name, p.name),
		run: check(verifyOnePerPeriodQuery, func(e env) verifyOnePerPeriodArgs {
			return verifyOnePerPeriodArgs{MessageType: string(k.Message), Plural: k.Plural, Unit: p.unit, Format: p.format,
				MaxExamples: e.maxExamples}
		}),
	}
}

// kindCategories is each shipped kind's Meta category, as JSON: what
// no_send_after_opt_out holds a message of the kind to.
func kindCategories() string {
	out := map[sm.Message]sm.Category{}
	for _, k := range sm.Kinds() {
		out[k.Message] = k.Category
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic("verify: encode the kinds' categories: " + err.Error())
	}
	return string(b)
}

// kindChecks are the one-per-period checks of the kinds that ask for one.
func kindChecks() []invariant {
	var out []invariant
	for _, k := range sm.Kinds() {
		if k.Check != "" {
			out = append(out, onePerPeriod(k))
		}
	}
	return out
}

var invariants = slices.Concat([]invariant{
	{
		name: CheckGoodbyeQueued,
		rule: "every goodbye_sent user whose latest logged transition put them in goodbye_sent has a queued goodbye " +
			"(any status: one cancelled at send time or by an operator was queued too) for the UTC day of goodbye_sent_at, " +
			"unless that transition held them out (the holdout: see no_goodbye_to_holdout); exempt: users with no such log row (the bot or an " +
			"import set the state), no goodbye_sent_at (see state_timestamps), or a goodbye day that ended before " +
			"as-of minus the retention (cleanup may have deleted it)",
		run: check(verifyGoodbyeQueuedQuery, func(e env) verifyGoodbyeQueuedArgs {
			return verifyGoodbyeQueuedArgs{GoodbyeStates: e.GoodbyeStates, Cutoff: e.cutoff, MessageType: string(goodbye.Message),
				MaxExamples: e.maxExamples}
		}),
	},
}, kindChecks(), []invariant{
	{
		name: CheckNoExpiredClaims,
		rule: "no message is in flight (processing) whose claim is abandoned at as-of (its holder's lease ran out, or a claim without a holder is past claimed_until); " +
			"the next queue-process settles such claims from its send ledger",
		run: check(verifyNoExpiredClaimsQuery, func(e env) verifyNoExpiredClaimsArgs {
			return verifyNoExpiredClaimsArgs{AsOf: e.asOf, MaxExamples: e.maxExamples}
		}),
	},
	{
		name: CheckTransitionsAllowed,
		rule: "every logged transition (from_state, trigger, to_state) is a row of the state machine's transition table",
		run: check(verifyTransitionsAllowedQuery, func(e env) verifyTransitionsAllowedArgs {
			return verifyTransitionsAllowedArgs{AllowedFrom: e.allowedFrom, AllowedTrigger: e.allowedTrigger, AllowedTo: e.allowedTo,
				MaxExamples: e.maxExamples}
		}),
	},
	{
		name: CheckLogMatchesState,
		rule: "a user's latest logged transition leads to their current state, unless the state changed after " +
			"the log row was written (state_changed_at, stamped by a trigger on every change of state whoever makes it, " +
			"whatever they do with updated_at); rows without the stamps compare updated_at with the transition's time; " +
			"users with no logged transition are not checked",
		run: check(verifyLogMatchesStateQuery, func(e env) verifyLogMatchesStateArgs {
			return verifyLogMatchesStateArgs{MaxExamples: e.maxExamples}
		}),
	},
	{
		name: CheckStateTimestamps,
		rule: "goodbye_sent users have goodbye_sent_at and remind_later users have remind_at; " +
			"without them the daily job can never move the user on",
		run: check(verifyStateTimestampsQuery, func(e env) verifyStateTimestampsArgs {
			return verifyStateTimestampsArgs{GoodbyeStates: e.GoodbyeStates, TimerStates: e.TimerStates, TimerClocks: e.TimerClocks,
				MaxExamples: e.maxExamples}
		}),
	},
	{
		name: CheckNoUserStuck,
		rule: stuckRule(),
		run: check(verifyNoUserStuckQuery, func(e env) verifyNoUserStuckArgs {
			return verifyNoUserStuckArgs{
				AsOf:             e.asOf,
				Grace:            StuckGrace,
				GoodbyeKeyInfix:  goodbye.KeyInfix,
				Inactivity:       e.Inactivity,
				InactivityStates: e.InactivityStates,
				GoodbyeWindow:    e.GoodbyeWindow,
				GoodbyeStates:    e.GoodbyeStates,
				TimerStates:      e.TimerStates,
				TimerClocks:      e.TimerClocks,
				TimerWaits:       e.TimerWaits,
				MaxExamples:      e.maxExamples,
			}
		}),
	},
	{
		name: CheckInstantsPlausible,
		rule: "no user's last_activity_at is more than " + activity.MaxFireSkew.String() + " past the later of the database clock and as-of, " +
			"no remind_at more than the remind-later wait past that, and none of a user's clocks is infinite: " +
			"such an instant (a bot's timestamp in the wrong unit) keeps the user from every goodbye or reminder; " +
			"engagement_fire refuses them (EN005), so these were written before it or by hand",
		run: check(verifyInstantsPlausibleQuery, func(e env) verifyInstantsPlausibleArgs {
			return verifyInstantsPlausibleArgs{AsOf: e.asOf, Skew: activity.MaxFireSkew, RemindWait: sm.RemindLaterPeriod,
				MaxExamples: e.maxExamples}
		}),
	},
	{
		name: CheckNoSendAfterOptOut,
		rule: "no message was sent to a user who had said no, whoever queued it: no marketing message (every type but the " +
			"kinds of another category and the custom types declared otherwise with engagementctl categories) while its user " +
			"was opted out (the user's latest consent event before sent_at, in the order recorded, is an opt-out that took " +
			"effect, at its at or when recorded if later, more than " + OptOutGrace.String() + " before the send, or before " +
			"the message was queued), and no message at all after its user was erased (engagement_erasures) unless they " +
			"opted back in; " + OptOutGrace.String() + " is the time a send that had started when the wish committed may " +
			"take to settle; users opted out without a consent event are not checked; exempt: messages of other categories " +
			"sent to opted-out users (the opt-out's own confirmation is one)",
		run: check(verifyNoSendAfterOptOutQuery, func(e env) verifyNoSendAfterOptOutArgs {
			return verifyNoSendAfterOptOutArgs{Grace: OptOutGrace, Categories: kindCategories(), MaxExamples: e.maxExamples}
		}),
	},
	{
		name: CheckNoGoodbyeToHoldout,
		rule: "no user the daily job held out of a goodbye (engagement-daily --holdout-percent: their goodbye's log row " +
			"says holdout) has a goodbye of that cycle in the queue, in any status but cancelled: one for that UTC day " +
			"(the run's as-of), or one queued without it (engagementctl enqueue, the API, the bot's SQL) after the " +
			"held-out move and before the user's next goodbye move",
		run: check(verifyNoGoodbyeToHoldoutQuery, func(e env) verifyNoGoodbyeToHoldoutArgs {
			return verifyNoGoodbyeToHoldoutArgs{MessageType: string(goodbye.Message), Trigger: string(sm.Inactivity14d),
				MaxExamples: e.maxExamples}
		}),
	},
	{
		name: CheckTimeZonesUsable,
		rule: "every user_profiles.timezone that is set is one PostgreSQL can read (any case, links, POSIX specs); " +
			"for a value it cannot, quiet hours fall back to the operator's --timezone",
		run: check(verifyTimeZonesUsableQuery, func(e env) verifyTimeZonesUsableArgs {
			return verifyTimeZonesUsableArgs{MaxExamples: e.maxExamples}
		}),
	},
	{
		name: CheckDataAPIClosed,
		rule: "no table, sequence or function of the scheduler's (engagement_*, and user_profiles, user_engagement_states " +
			"and transactions unless adopted from the bot; engagement_message_queue always, adopted or not) can be reached by " +
			"Supabase's Data API roles anon and authenticated where they exist and may use the schema: a table they hold " +
			"SELECT, INSERT, UPDATE or DELETE on with row level security off or a policy that applies to them or PUBLIC, " +
			"a sequence they hold USAGE, SELECT or UPDATE on, a function they may EXECUTE (SECURITY DEFINER or plain, " +
			"the example says which); exempt: a table they hold privileges on that row level security keeps closed to them",
		run: check(verifyDataAPIClosedQuery, func(e env) verifyDataAPIClosedArgs {
			return verifyDataAPIClosedArgs{MaxExamples: e.maxExamples}
		}),
	},
})

// Run checks the scheduler's invariants from one read-only snapshot and
// reports every check. Each check is one set-based query over the tables
// (the largest scan the queue's goodbyes and reviews, or the transition
// log); nothing is read per user. An error means the checks could not run;
// a broken invariant is a report with OK false.
func Run(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Report, error) {
	retention := cmp.Or(cfg.Retention, engagement.DefaultRetention)
	if retention < 0 {
		return nil, fmt.Errorf("retention must be positive, got %s", retention)
	}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("begin the verify snapshot: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	return RunTx(ctx, tx, cfg)
}

// RunTx is Run inside tx, which the caller opened (the console's pages
// read in a read-only transaction with a statement timeout of their own);
// for one consistent report, tx should be REPEATABLE READ.
func RunTx(ctx context.Context, tx pgx.Tx, cfg Config) (*Report, error) {
	retention := cmp.Or(cfg.Retention, engagement.DefaultRetention)
	if retention < 0 {
		return nil, fmt.Errorf("retention must be positive, got %s", retention)
	}
	asOf, err := postgres.AsOf(ctx, tx, cfg.AsOf)
	if err != nil {
		return nil, err
	}

	// Every check's arguments come from these.
	e := env{asOf: asOf, cutoff: asOf.Add(-retention), maxExamples: MaxExamples, Deadlines: sm.DeadlineArgs()}
	for _, t := range sm.Transitions() {
		e.allowedFrom = append(e.allowedFrom, string(t.From))
		e.allowedTrigger = append(e.allowedTrigger, string(t.Trigger))
		e.allowedTo = append(e.allowedTo, string(t.To))
	}

	rep := &Report{AsOf: asOf, Retention: retention.String(), OK: true, Broken: []string{}}
	for _, inv := range invariants {
		f, err := inv.run(ctx, tx, e)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", inv.name, err)
		}
		c := Check{Name: inv.name, Rule: inv.rule, Violations: f.Violations, Exempt: f.Exempt, Examples: f.Examples}
		c.OK = c.Violations == 0
		if !c.OK {
			rep.OK = false
			rep.Broken = append(rep.Broken, c.Name)
		}
		rep.Checks = append(rep.Checks, c)
	}
	return rep, nil
}
