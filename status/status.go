// Package status reads what engagementctl status reports, from one
// snapshot, writing nothing: the queue by status (due, oldest due, abandoned
// claims, cancel reasons), the users by state, unusable time zones, the
// latest runs of each job, the send budgets, what queue-process runs with
// and Meta's verdict on the number, and what the messages cost
// (the last 30 days' spend, the next 7 days' goodbyes).
//
// Its readers of the queue, the users and the runs (ReadQueue, ReadUsers,
// ReadRuns) are the console's too: its pages build their data from them,
// so both say the same of each fact, read by one statement.
package status

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/pricing"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// DefaultRuns is how many of the latest runs Status reports per job
// and shard.
const DefaultRuns = 5

// Status is a snapshot of the scheduler's database, read in one consistent
// transaction: the queue, the users' states and the latest job runs.
type Status struct {
	AsOf  time.Time `json:"as_of"`
	Queue Queue     `json:"queue"`
	Users Users     `json:"users"`
	// RunsPerJob is how many of the latest runs Runs holds per job and shard.
	RunsPerJob int   `json:"runs_per_job"`
	Runs       []Run `json:"runs"`
	// Budgets are the send budgets (queue-process --daily-limit), one per
	// transport a budgeted process ran on; empty when none did.
	Budgets []delivery.BudgetReport `json:"budgets"`
	// QueueSettings are what the last queue-process run on each transport
	// ran with: the order (--kind-priority), the per-user cap, the pace
	// and the budget's limit, as the run recorded them at its start
	// (delivery.ReadQueueSettings); empty when no run recorded any.
	QueueSettings []delivery.QueueSettings `json:"queue_settings"`
	// NumberHealth is Meta's verdict on each Cloud API number as the runs
	// (the Graph API) and the console's webhook recorded it: rating, tier,
	// flag, when last read, and the templates Meta paused
	// (delivery.ReadNumberHealth); empty on other transports.
	NumberHealth []delivery.NumberReport `json:"number_health"`
	// Pauses are the transports paused now: the receiver refused the
	// whole account (delivery.ReadPauses, the active ones); nothing is sent
	// through them until each ends or is cleared. Empty when none is.
	Pauses []delivery.Pause `json:"pauses"`
	// Spend is what Meta bills, on its list prices, for the messages its
	// Cloud API accepted in the last 30 days: the delivered ones (package
	// pricing; the console's queue page shows the same); other
	// transports' messages are counted, at no Meta cost.
	Spend pricing.Spend `json:"spend"`
	// SpendForecast is what the messages the daily runs of the next
	// ForecastDays days would queue cost (the console's forecast page's
	// sum).
	SpendForecast SpendForecast `json:"spend_forecast"`
}

// ForecastDays is how many coming days SpendForecast covers, as the
// console's forecast.
const ForecastDays = 7

// SpendForecast is the cost of the messages the daily runs of the next
// Days days would send: the daily job's dry run as of AsOf + Days days
// (cumulative: every user due by then), each timer's messages costed by
// pricing.ForecastMessages.
type SpendForecast struct {
	Days int `json:"days"`
	pricing.Forecast
}

// Options are ReadWith's arguments.
type Options struct {
	// AsOf is the instant the report treats as now: the database clock
	// when zero.
	AsOf time.Time
	// RunsPerJob is how many of the latest runs to report per job and
	// shard: DefaultRuns when 0.
	RunsPerJob int
	// Prices are the prices Spend and SpendForecast go by: the shipped
	// defaults (pricing.Default) when nil.
	Prices *pricing.Prices
	// Machine is the state machine whose timers SpendForecast dry-runs
	// and whose kinds it costs: the shipped tables (statemachine.Default,
	// the zero value) in engagementctl.
	Machine sm.Machine
}

// Queue is the message queue at a glance.
type Queue struct {
	Total int64 `json:"total"`
	// Counts holds one entry per (status, message type) that has messages,
	// ordered by status (see MessageStatuses), then type.
	Counts []QueueCount `json:"counts"`
	// DuePending counts pending messages whose scheduled_for has come.
	DuePending int64 `json:"due_pending"`
	// OldestDuePendingAt is the scheduled_for of the oldest due pending
	// message and OldestDuePendingAgeSeconds its age at AsOf; both null
	// when nothing is due.
	OldestDuePendingAt         *time.Time `json:"oldest_due_pending_at"`
	OldestDuePendingAgeSeconds *int64     `json:"oldest_due_pending_age_seconds"`
	// ExpiredClaims counts in-flight (processing) messages past their
	// claim deadline: the next queue-process settles them.
	ExpiredClaims int64 `json:"expired_claims"`
	// KeptReceipts counts receipts that came before the send they name was
	// recorded, kept for it (they apply when it is); those that never
	// match, the bot's own conversation's, go after a week (cleanup).
	KeptReceipts int64 `json:"kept_receipts"`
	// CancelledByReason counts cancelled messages by why they were not
	// sent: every reason sm.CancelReasons lists, 0 included, then any
	// other by name, then ReasonUnspecified for those cancelled without a
	// reason (before reasons were recorded, or by another writer), when
	// there are any.
	CancelledByReason []ReasonCount `json:"cancelled_by_reason"`
	// Waiting is the pending messages due after AsOf, by why they wait:
	// the console's queue page shows them, this report does not.
	Waiting Waiting `json:"-"`
}

// Waiting is the pending messages due later, each counted once by why it
// waits (queries/status_queue_pending.sql says how each is told).
type Waiting struct {
	// QuietHours counts those queue-process held back by quiet hours,
	// and QuietHoursUntil is the earliest end it moved them to (nil when
	// none).
	QuietHours      int64
	QuietHoursUntil *time.Time
	// Budget counts those the send budget moved down its line.
	Budget int64
	// Retrying counts those attempted before, waiting for a retry.
	Retrying int64
	// Later counts every pending message due later, whatever the reason.
	Later int64
}

// ReasonUnspecified stands for a cancelled message without a cancel_reason.
const ReasonUnspecified = "unspecified"

// ReasonCount is how many messages were cancelled for one reason.
type ReasonCount struct {
	Reason   string `json:"reason"`
	Messages int64  `json:"messages"`
}

// QueueCount is how many messages of one type are in one status.
type QueueCount struct {
	Status      string `json:"status"`
	MessageType string `json:"message_type"`
	Messages    int64  `json:"messages"`
}

// Users counts users by engagement state.
type Users struct {
	Total    int64 `json:"total"`
	OptedOut int64 `json:"opted_out"`
	// UnusableTimeZones counts users whose user_profiles.timezone
	// PostgreSQL cannot read: their quiet hours use the operator's
	// --timezone instead (verify's time_zones_usable names them).
	UnusableTimeZones int64 `json:"unusable_time_zones"`
	// ByState lists every state, in the state machine's order, with its
	// users and how many of them opted out of re-engagement.
	ByState []StateCount `json:"by_state"`
}

// StateCount is the users in one state.
type StateCount struct {
	State    string `json:"state"`
	Users    int64  `json:"users"`
	OptedOut int64  `json:"opted_out"`
}

// Run is one engagement_job_runs row with its main counters.
type Run struct {
	ID         int64      `json:"id"`
	Job        string     `json:"job"`
	Shard      string     `json:"shard,omitempty"`
	AsOf       time.Time  `json:"as_of"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// Status is running (a job's run in progress, holding its lease),
	// delivering (a queue-process run in progress: they hold none),
	// succeeded, partial, failed or abandoned.
	Status string `json:"status"`
	// Counters are nil while the run is in progress, or when it died
	// before recording them.
	Counters *RunCounters `json:"counters"`
	Error    string       `json:"error,omitempty"`
	// RawCounters are the counters as the run recorded them, every one
	// (the console's runs page shows them all); nil when none were.
	RawCounters json.RawMessage `json:"-"`
}

// RunCounters are the main counters a job run recorded.
type RunCounters struct {
	Processed  int `json:"processed"`
	Succeeded  int `json:"succeeded"`
	Failed     int `json:"failed"`
	Skipped    int `json:"skipped"`
	Queued     int `json:"queued"`
	Duplicates int `json:"duplicates"`
	// Delivery is the run's queue step, when it delivered messages.
	Delivery *DeliveryCounters `json:"delivery,omitempty"`
}

// DeliveryCounters are a run's queue-step counters.
type DeliveryCounters struct {
	Transport string `json:"transport"`
	Sent      int    `json:"sent"`
	Retried   int    `json:"retried"`
	Failed    int    `json:"failed"`
}

// Read reads the queue, the users and the latest runsPerJob runs of each
// job and shard (DefaultRuns when 0) as of asOf (the database clock
// when zero), from one snapshot, writing nothing. Each part is one set-based
// query; the run history uses the (job, started_at) index.
func Read(ctx context.Context, pool *pgxpool.Pool, asOf time.Time, runsPerJob int) (*Status, error) {
	return ReadWith(ctx, pool, Options{AsOf: asOf, RunsPerJob: runsPerJob})
}

// ReadWith is Read with the prices the spend goes by (o.Prices).
func ReadWith(ctx context.Context, pool *pgxpool.Pool, o Options) (*Status, error) {
	asOf, runsPerJob := o.AsOf, cmp.Or(o.RunsPerJob, DefaultRuns)
	if runsPerJob < 0 {
		return nil, fmt.Errorf("runs per job must be positive, got %d", runsPerJob)
	}
	// One snapshot, always rolled back. Not READ ONLY: the spend forecast
	// dry-runs the daily job (scheduler.ForecastDaily), whose move
	// statements, writes switched off, write and lock nothing, but which
	// PostgreSQL refuses to run in a read-only transaction.
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return nil, fmt.Errorf("begin the status snapshot: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // nothing to keep: always rolled back
	if asOf, err = postgres.AsOf(ctx, tx, asOf); err != nil {
		return nil, err
	}
	st := &Status{AsOf: asOf, RunsPerJob: runsPerJob}
	if st.Queue, err = ReadQueue(ctx, tx, asOf); err != nil {
		return nil, err
	}
	if st.Users, err = ReadUsers(ctx, tx); err != nil {
		return nil, err
	}
	if st.Users.UnusableTimeZones, err = readUnusableTimeZones(ctx, tx); err != nil {
		return nil, err
	}
	if st.Runs, err = ReadRuns(ctx, tx, runsPerJob); err != nil {
		return nil, err
	}
	if st.Budgets, err = delivery.ReadBudgets(ctx, tx); err != nil {
		return nil, err
	}
	if st.Budgets == nil {
		st.Budgets = []delivery.BudgetReport{}
	}
	if st.QueueSettings, err = delivery.ReadQueueSettings(ctx, tx); err != nil {
		return nil, err
	}
	if st.NumberHealth, err = delivery.ReadNumberHealth(ctx, tx); err != nil {
		return nil, err
	}
	if st.Pauses, err = ActivePauses(ctx, tx); err != nil {
		return nil, err
	}
	if st.Spend, err = pricing.ReadSpend(ctx, tx, asOf, o.Prices); err != nil {
		return nil, err
	}
	if st.SpendForecast, err = readSpendForecast(ctx, tx, asOf, o.Machine, o.Prices); err != nil {
		return nil, err
	}
	return st, nil
}

// ReadQueue reads the queue as of asOf in db (a transaction, for one
// consistent snapshot): its messages by status and type, the pending ones
// (due, the oldest due, and those due later by why they wait), the
// abandoned claims and the cancelled ones by reason. Three set-based
// statements; the pending ones read the partial indexes queue-process
// claims with.
func ReadQueue(ctx context.Context, db postgres.Querier, asOf time.Time) (Queue, error) {
	q := Queue{Counts: []QueueCount{}}
	err := statusQueueCountsQuery.Each(ctx, db, statusQueueCountsArgs{Statuses: sm.MessageStatuses()}, func(c *statusQueueCountsRow) error {
		q.Counts = append(q.Counts, QueueCount(*c)) // the same fields, by the columns' names
		q.Total += c.Messages
		return nil
	})
	if err != nil {
		return Queue{}, fmt.Errorf("count queued messages: %w", err)
	}
	p, err := statusQueuePendingQuery.One(ctx, db, statusQueuePendingArgs{AsOf: asOf})
	if err != nil {
		return Queue{}, fmt.Errorf("read the pending messages: %w", err)
	}
	q.DuePending, q.ExpiredClaims, q.KeptReceipts = p.Due, p.ExpiredClaims, p.KeptReceipts
	if p.OldestDue != nil {
		at := p.OldestDue.UTC()
		age := int64(asOf.Sub(at) / time.Second)
		q.OldestDuePendingAt, q.OldestDuePendingAgeSeconds = &at, &age
	}
	q.Waiting = Waiting{QuietHours: p.QuietHours, QuietHoursUntil: utc(p.QuietHoursUntil), Budget: p.Budget,
		Retrying: p.Retrying, Later: p.Later}
	if q.CancelledByReason, err = readCancelledByReason(ctx, db); err != nil {
		return Queue{}, err
	}
	return q, nil
}

// readCancelledByReason counts the cancelled messages by reason, in
// Queue.CancelledByReason's order.
func readCancelledByReason(ctx context.Context, db postgres.Querier) ([]ReasonCount, error) {
	counts := map[string]int64{}
	err := statusCancelledReasonsQuery.Each(ctx, db, statusCancelledReasonsArgs{Unspecified: ReasonUnspecified},
		func(c *statusCancelledReasonsRow) error {
			counts[c.Reason] = c.Messages
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("count cancelled messages: %w", err)
	}
	reasons := sm.CancelReasons()
	var others []string
	for r := range counts {
		if !slices.Contains(reasons, r) && r != ReasonUnspecified {
			others = append(others, r)
		}
	}
	slices.Sort(others)
	reasons = append(reasons, others...)
	if counts[ReasonUnspecified] > 0 {
		reasons = append(reasons, ReasonUnspecified)
	}
	out := make([]ReasonCount, 0, len(reasons))
	for _, r := range reasons {
		out = append(out, ReasonCount{Reason: r, Messages: counts[r]})
	}
	return out, nil
}

// ReadUsers counts the users in db by state, every state of the state
// machine in its order (0 included), with how many of each opted out of
// re-engagement, and their totals: one set-based statement. It leaves
// UnusableTimeZones 0 (ReadWith reads it; the console does not show it).
func ReadUsers(ctx context.Context, db postgres.Querier) (Users, error) {
	var u Users
	counts := map[string]StateCount{}
	err := statusUsersQuery.Each(ctx, db, sqlfile.None{}, func(c *statusUsersRow) error {
		counts[c.State] = StateCount(*c) // the same fields, by the columns' names
		return nil
	})
	if err != nil {
		return Users{}, fmt.Errorf("count users by state: %w", err)
	}
	for _, s := range sm.States() {
		c := counts[string(s)]
		c.State = string(s)
		u.ByState = append(u.ByState, c)
		u.Total += c.Users
		u.OptedOut += c.OptedOut
	}
	return u, nil
}

// readUnusableTimeZones counts the users whose time zone PostgreSQL
// cannot read (Users.UnusableTimeZones).
func readUnusableTimeZones(ctx context.Context, db postgres.Querier) (int64, error) {
	zones, err := statusTimeZonesQuery.One(ctx, db, sqlfile.None{})
	if err != nil {
		return 0, fmt.Errorf("count unusable time zones: %w", err)
	}
	return zones.UnusableTimeZones, nil
}

// ReadRuns returns the latest perJob runs of every job and shard in db,
// by job and shard (the unsharded first), newest first, their times in
// UTC: one statement, an index probe per job and shard.
func ReadRuns(ctx context.Context, db postgres.Querier, perJob int) ([]Run, error) {
	runs := []Run{}
	err := statusRunsQuery.Each(ctx, db, statusRunsArgs{RunsPerJob: int64(perJob)}, func(r *statusRunsRow) error {
		run := Run{ID: r.ID, Job: r.Job, Shard: r.Shard, AsOf: r.AsOf.UTC(), StartedAt: r.StartedAt.UTC(),
			FinishedAt: utc(r.FinishedAt), Status: r.Status, Error: r.Error}
		if len(r.Counters) > 0 {
			var c RunCounters
			if err := json.Unmarshal(r.Counters, &c); err != nil {
				return fmt.Errorf("run %d: decode counters: %w", r.ID, err)
			}
			run.Counters, run.RawCounters = &c, r.Counters
		}
		runs = append(runs, run)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the latest runs: %w", err)
	}
	return runs, nil
}

// utc is t in UTC, nil when t is.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// readSpendForecast dry-runs the daily job as of ForecastDays days after
// asOf: each timer's step's count is every message of its kind the runs
// until then would queue (the sum of the console's forecast days), costed.
func readSpendForecast(ctx context.Context, tx pgx.Tx, asOf time.Time, machine sm.Machine, prices *pricing.Prices) (SpendForecast, error) {
	steps, err := scheduler.ForecastDaily(ctx, tx, asOf.Add(ForecastDays*24*time.Hour), machine)
	if err != nil {
		return SpendForecast{}, fmt.Errorf("forecast the timers' messages: %w", err)
	}
	messages := TimerMessages(machine, StepMoves(steps))
	return SpendForecast{Days: ForecastDays, Forecast: pricing.ForecastMessages(machine, messages, prices)}, nil
}

// StepMoves is how many users each of the daily job's steps moves, by
// its trigger.
func StepMoves(steps scheduler.Steps) map[sm.Trigger]int64 {
	out := map[sm.Trigger]int64{}
	for _, st := range steps {
		out[sm.Trigger(st.Name)] += int64(st.Succeeded)
	}
	return out
}

// TimerMessages is the messages the moves of the daily job's timers
// queue, by kind: one for each move of a timer whose trigger queues a
// kind of machine, but a kind queued on request only (the reminder, with
// engagement-daily --send-reminder), which a dry run does not ask for.
func TimerMessages(machine sm.Machine, moves map[sm.Trigger]int64) map[sm.Message]int64 {
	out := map[sm.Message]int64{}
	for _, k := range machine.Kinds() {
		if n, ok := moves[k.Trigger]; ok && k.Trigger != "" && !k.OnRequest {
			out[k.Message] += n
		}
	}
	return out
}

// ActivePauses reads the transports paused now; an empty list when none is.
func ActivePauses(ctx context.Context, db postgres.Querier) ([]delivery.Pause, error) {
	all, err := delivery.ReadPauses(ctx, db)
	if err != nil {
		return nil, err
	}
	active := []delivery.Pause{}
	for _, p := range all {
		if p.Active {
			active = append(active, p)
		}
	}
	return active, nil
}
