package console

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/funnel"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/pricing"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/status"
	"github.com/engagement-scheduler/engagement/verify"
)

// pages is the console's table of pages (page.go), in the navigation's
// order. A new page is its row, its data type and loader below, its
// template and its statement (docs/development.md, "Adding a console
// page").
var pages = []page{
	{name: "overview", title: "Overview", route: "GET /{$}", nav: true, snapshot: (*server).overview,
		served: func(s *server, ctx context.Context, data any) (any, error) { return s.withHealth(ctx, data.(Overview)) },
		charts: merged(template.FuncMap{"statesChart": statesChart, "funnelChart": funnelChart, "reviewsChart": reviewsChart}, liftFuncs)},
	{name: "queue", title: "Queue", route: "GET /queue", nav: true, snapshot: (*server).queue,
		charts: template.FuncMap{"throughputChart": throughputChart, "whatsAppMeaning": WhatsAppMeaning}},
	{name: "runs", title: "Runs", route: "GET /runs", nav: true, load: (*server).runs,
		charts: template.FuncMap{"runsCharts": runsCharts, "runsPerJob": func() int { return RunsPerJob }}},
	{name: "verify", title: "Verify", route: "GET /verify", nav: true, snapshot: (*server).verify},
	{name: "user", title: "User", route: "GET /users", nav: true, load: (*server).user, post: (*server).searchUser,
		charts: template.FuncMap{"kinds": sm.Kinds}},
	{name: "forecast", title: "Forecast", route: "GET /forecast", nav: true, snapshot: (*server).forecast,
		charts: template.FuncMap{"forecastChart": forecastChart}},
	{name: "audit", title: "Audit", route: "GET /audit", nav: true, load: (*server).audit},
	{name: "error", title: "Error"},
	{name: "preview", title: "Confirm"},
	{name: "done", title: "Done"},
}

// Overview is the overview page: users by state, the goodbye funnel and
// the weekly reviews.
type Overview struct {
	AsOf     time.Time    `json:"as_of"`
	States   []StateCount `json:"states"`
	Users    int64        `json:"users"`
	OptedOut int64        `json:"opted_out"`
	Weeks    []StateWeek  `json:"states_by_week"`
	Funnel   []Cohort     `json:"funnel"`
	// Lift compares the goodbye's arms (the holdout's control group and
	// the users sent a goodbye), as engagementctl funnel does.
	Lift      *funnel.Report `json:"lift"`
	Reviews   []ReviewWeek   `json:"weekly_reviews"`
	StateList []string       `json:"-"`
	// Health is the summary at the top: what needs doing (health.go),
	// made when the page is served (withHealth).
	Health Health `json:"health"`
	// runs are the jobs' latest runs the health summary judges, read
	// with the rest of the page.
	runs []status.Run
}

// StateCount is how many users are in a state.
type StateCount struct {
	State string `json:"state"`
	Users int64  `json:"users"`
}

// StateWeek is users by state at the end of an ISO week (the current
// week: at as-of).
type StateWeek struct {
	WeekStart time.Time        `json:"week_start"`
	At        time.Time        `json:"at"`
	Users     map[string]int64 `json:"users"`
}

// Cohort is the goodbyes logged in one ISO week and what became of them
// (see queries/funnel.sql for each count's definition).
type Cohort struct {
	WeekStart time.Time `json:"week_start"`
	Goodbyes  int64     `json:"goodbyes"`
	// Accepted goodbyes WhatsApp (or the bot) took; of them, Delivered and
	// Read by its receipts, and FailedLate failed after acceptance.
	// Receipts is how many any receipt reached: 0 when nobody passes them
	// on, and then Delivered and Read say nothing.
	Accepted            int64 `json:"accepted"`
	Delivered           int64 `json:"delivered"`
	Read                int64 `json:"read"`
	FailedLate          int64 `json:"failed_late"`
	Receipts            int64 `json:"receipts"`
	AnsweredHelp        int64 `json:"answered_help"`
	AnsweredRemindLater int64 `json:"answered_remind_later"`
	AnsweredNotNow      int64 `json:"answered_not_now"`
	CameBack            int64 `json:"came_back"`
	TimedOut            int64 `json:"timed_out"`
	Undelivered         int64 `json:"undelivered"`
	Waiting             int64 `json:"waiting"`
	Reactivated         int64 `json:"reactivated"`
	// ReactivatedShare is Reactivated / Goodbyes (0 without goodbyes).
	ReactivatedShare float64 `json:"reactivated_share"`
	// WindowClosed is true when every goodbye of the week has had its
	// whole reactivation window: the share is final.
	WindowClosed bool `json:"window_closed"`
}

// ReviewWeek is the weekly reviews covering one ISO week.
type ReviewWeek struct {
	WeekStart time.Time `json:"week_start"`
	Queued    int64     `json:"queued"`
	Sent      int64     `json:"sent"`
}

func (s *server) overview(ctx context.Context) (any, error) {
	var o Overview
	var runs []status.Run
	for _, st := range sm.States() {
		o.StateList = append(o.StateList, string(st))
	}
	err := s.read(ctx, func(tx pgx.Tx, asOf time.Time) error {
		o.AsOf = asOf
		users, err := status.ReadUsers(ctx, tx)
		if err != nil {
			return err
		}
		o.States = make([]StateCount, len(users.ByState))
		for i, c := range users.ByState {
			o.States[i] = StateCount{State: c.State, Users: c.Users}
		}
		o.Users, o.OptedOut = users.Total, users.OptedOut

		var nowStates []string
		var nowUsers []int64
		for _, c := range o.States {
			nowStates, nowUsers = append(nowStates, c.State), append(nowUsers, c.Users)
		}
		err = statesWeeklyQuery.Each(ctx, tx, statesWeeklyArgs{
			AsOf: asOf, Weeks: Weeks, States: o.StateList, InitialState: string(sm.Active),
			NowStates: nowStates, NowUsers: nowUsers,
		}, func(w *statesWeeklyRow) error {
			if len(o.Weeks) == 0 || !o.Weeks[len(o.Weeks)-1].WeekStart.Equal(w.WeekStart) {
				o.Weeks = append(o.Weeks, StateWeek{WeekStart: w.WeekStart.UTC(), At: w.WeekEnd.UTC(), Users: map[string]int64{}})
			}
			o.Weeks[len(o.Weeks)-1].Users[w.State] = w.Users
			return nil
		})
		if err != nil {
			return err
		}

		if o.Funnel, err = goodbyeFunnel(ctx, tx, asOf); err != nil {
			return err
		}
		if o.Lift, err = funnel.Read(ctx, tx, funnel.Options{AsOf: asOf, Weeks: Weeks}); err != nil {
			return err
		}
		reviews, err := reviewsWeeklyQuery.All(ctx, tx, reviewsWeeklyArgs{
			AsOf: asOf, Weeks: Weeks, MessageType: string(sm.WeeklyReviewMessage),
		})
		if err != nil {
			return err
		}
		o.Reviews = make([]ReviewWeek, len(reviews))
		for i, r := range reviews {
			o.Reviews[i] = ReviewWeek(r)
		}
		all, err := status.ReadRuns(ctx, tx, 1)
		runs = latestRuns(all)
		return err
	})
	if err != nil {
		return o, err
	}
	o.runs = runs
	return o, nil
}

// goodbyeFunnel reads the goodbye funnel, its triggers and states from the
// state machine's table.
func goodbyeFunnel(ctx context.Context, tx pgx.Tx, asOf time.Time) ([]Cohort, error) {
	var out []Cohort
	err := funnelQuery.Each(ctx, tx, funnelArgs{
		AsOf:               asOf,
		Weeks:              Weeks,
		Window:             ReactivationWindow,
		GoodbyeTrigger:     string(sm.Inactivity14d),
		GoodbyeState:       string(sm.GoodbyeSent),
		GoodbyeKind:        string(sm.GoodbyeMessage),
		ComebackTrigger:    string(sm.UserMessage),
		AnswerHelp:         string(sm.GoodbyeAnswerHelp),
		AnswerRemindLater:  string(sm.GoodbyeAnswerRemindLater),
		AnswerDormant:      string(sm.GoodbyeAnswerDormant),
		TimeoutTrigger:     string(sm.GoodbyeTimeout),
		UndeliveredTrigger: string(sm.GoodbyeUndelivered),
	}, func(r *funnelRow) error {
		c := Cohort{WeekStart: r.WeekStart.UTC(), Goodbyes: r.Goodbyes, Accepted: r.Accepted, Delivered: r.Delivered,
			Read: r.Read, FailedLate: r.FailedLate, Receipts: r.Receipts, AnsweredHelp: r.AnsweredHelp,
			AnsweredRemindLater: r.AnsweredRemindLater, AnsweredNotNow: r.AnsweredNotNow, CameBack: r.CameBack,
			TimedOut: r.TimedOut, Undelivered: r.Undelivered, Waiting: r.Waiting, Reactivated: r.Reactivated,
			WindowClosed: r.WindowClosed}
		if c.Goodbyes > 0 {
			c.ReactivatedShare = float64(c.Reactivated) / float64(c.Goodbyes)
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// Queue is the queue page.
type Queue struct {
	AsOf       time.Time            `json:"as_of"`
	Counts     []QueueCount         `json:"counts"`
	Kinds      []string             `json:"kinds"`
	Statuses   []string             `json:"statuses"`
	Pending    Pending              `json:"pending"`
	Latency    Latency              `json:"latency"`
	Throughput []HourCount          `json:"throughput"`
	Failures   []FailureGroup       `json:"failures"`
	Cancelled  []status.ReasonCount `json:"cancelled"`
	Budgets    []Budget             `json:"budgets"`
	// Settings are what the last queue-process run on each transport ran
	// with (the order, the per-user cap, the pace), and Numbers Meta's
	// verdict on the Cloud API number (rating, tier, paused templates,
	// when last read): what engagementctl status reports, from the
	// database (delivery.ReadQueueSettings, delivery.ReadNumberHealth).
	Settings []delivery.QueueSettings `json:"queue_settings"`
	Numbers  []delivery.NumberReport  `json:"number_health"`
	// Pauses are the transports paused now (status.ActivePauses): the bot
	// said WhatsApp refuses its whole account, and nothing is sent
	// through them until each ends or is cleared.
	Pauses          []delivery.Pause `json:"pauses"`
	matrix          map[[2]string]int64
	ThroughputHours int `json:"throughput_hours"`
	// FailedLastDay counts the messages that failed in the last 24 h,
	// over every reason group (shown or not).
	FailedLastDay int64 `json:"failed_last_24h"`
	// Receipts are WhatsApp's receipts for the messages accepted in the
	// last ReceiptsWindow.
	Receipts Receipts `json:"receipts"`
	// Spend is what Meta bills for the messages its Cloud API accepted in
	// the last 30 days, the delivered ones, on Meta's list prices
	// (Config.Prices; package pricing), and the messages other
	// transports sent, at no Meta cost.
	Spend pricing.Spend `json:"spend"`
}

// ReceiptsWindow is how far back the queue page's receipts look.
const ReceiptsWindow = 7 * 24 * time.Hour

// Receipts is what WhatsApp said of the messages it accepted in a window:
// delivered and read by its receipts, and failed after acceptance, by
// error code. Accepted without any Delivered or FailedLate means nobody
// passes receipts on.
type Receipts struct {
	Window     string      `json:"window"`
	Accepted   int64       `json:"accepted"`
	Delivered  int64       `json:"delivered"`
	Read       int64       `json:"read"`
	FailedLate int64       `json:"failed_late"`
	ByCode     []CodeCount `json:"failed_late_by_code"`
}

// CodeCount is how many messages failed after acceptance with a WhatsApp
// error code, and what Meta says it means.
type CodeCount struct {
	Code     string `json:"code"`
	Meaning  string `json:"meaning,omitempty"`
	Messages int64  `json:"messages"`
}

// Share is n of the accepted, as a fraction (0 when none were).
func (r Receipts) Share(n int64) float64 {
	if r.Accepted == 0 {
		return 0
	}
	return float64(n) / float64(r.Accepted)
}

// Heard reports whether any receipt came back in the window.
func (r Receipts) Heard() bool { return r.Delivered+r.FailedLate > 0 }

// Count returns the messages of a kind in a status (for the template).
func (q Queue) Count(kind, status string) int64 { return q.matrix[[2]string{kind, status}] }

// QueueCount is how many messages of a kind are in a status.
type QueueCount struct {
	Status   string `json:"status"`
	Kind     string `json:"kind"`
	Messages int64  `json:"messages"`
}

// Pending is what waits in the queue.
type Pending struct {
	Due             int64      `json:"due"`
	OldestDue       *time.Time `json:"oldest_due"`
	OldestWait      string     `json:"oldest_wait"`
	QuietHours      int64      `json:"held_by_quiet_hours"`
	QuietHoursUntil *time.Time `json:"quiet_hours_until"`
	// Budget counts the messages the send budget moved down the line
	// (queue-process --daily-limit): the budget panel says when they go.
	Budget   int64 `json:"waiting_on_budget"`
	Retrying int64 `json:"retrying"`
	Later    int64 `json:"later"`
}

// Latency is the send latency over the last day.
type Latency struct {
	Window string  `json:"window"`
	Sent   int64   `json:"sent"`
	P50    float64 `json:"p50_seconds"`
	P95    float64 `json:"p95_seconds"`
}

// HourCount is the messages sent in one hour.
type HourCount struct {
	Hour time.Time `json:"hour"`
	Sent int64     `json:"sent"`
}

// FailureGroup is the failed messages of one reason.
type FailureGroup struct {
	Reason string `json:"reason"`
	// Key identifies the group in a form (error_group_key): its reason,
	// base64url-encoded, which no form round trip alters (a browser sends
	// a newline back as CR LF).
	Key       string    `json:"key"`
	Messages  int64     `json:"messages"`
	Kinds     []string  `json:"kinds"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	SampleID  string    `json:"sample_id"`
	// LastDay and DayBefore count the group's messages that failed in the
	// last 24 h and in the 24 h before (when each settled: see
	// queries/queue_failures.sql).
	LastDay   int64 `json:"last_24h"`
	DayBefore int64 `json:"previous_24h"`
	// Permanent counts the messages whose transport called the failure
	// permanent (retrying cannot help: "HTTP 410 (permanent)"); requeuing
	// them asks for a second confirmation.
	Permanent int64 `json:"permanent"`

	allLastWindow int64 // the failures of the last 24 h over every group
}

// Trend compares the last 24 h with the 24 h before: "up", "down" or
// "flat".
func (g FailureGroup) Trend() string {
	switch {
	case g.LastDay > g.DayBefore:
		return "up"
	case g.LastDay < g.DayBefore:
		return "down"
	}
	return "flat"
}

// errorGroupKey is a failure group's key for forms; groupFromKey reads it.
func errorGroupKey(reason string) string { return base64.RawURLEncoding.EncodeToString([]byte(reason)) }

func groupFromKey(key string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(key)
	return string(b), err == nil && utf8.Valid(b)
}

const (
	latencyWindow   = 24 * time.Hour
	throughputHours = 48
	maxFailureRows  = 50
)

func (s *server) queue(ctx context.Context) (any, error) {
	q := Queue{matrix: map[[2]string]int64{}, ThroughputHours: throughputHours}
	err := s.read(ctx, func(tx pgx.Tx, asOf time.Time) error {
		q.AsOf = asOf
		sq, err := status.ReadQueue(ctx, tx, asOf)
		if err != nil {
			return err
		}
		q.Counts = make([]QueueCount, len(sq.Counts))
		for i, c := range sq.Counts {
			q.Counts[i] = QueueCount{Status: c.Status, Kind: c.MessageType, Messages: c.Messages}
		}
		slices.SortFunc(q.Counts, func(a, b QueueCount) int { // by kind, then status
			return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Status, b.Status))
		})
		q.Statuses = sm.MessageStatuses()
		for _, c := range q.Counts {
			if len(q.Kinds) == 0 || q.Kinds[len(q.Kinds)-1] != c.Kind {
				q.Kinds = append(q.Kinds, c.Kind)
			}
			q.matrix[[2]string{c.Kind, c.Status}] = c.Messages
		}
		w := sq.Waiting
		q.Pending = Pending{Due: sq.DuePending, OldestDue: sq.OldestDuePendingAt, QuietHours: w.QuietHours,
			QuietHoursUntil: w.QuietHoursUntil, Budget: w.Budget, Retrying: w.Retrying, Later: w.Later}
		q.Cancelled = cancelled(sq.CancelledByReason)
		p := &q.Pending
		if p.OldestDue != nil {
			p.OldestWait = formatSeconds(asOf.Sub(*p.OldestDue).Seconds())
		}
		if q.Budgets, err = budgets(ctx, tx); err != nil {
			return err
		}
		if q.Settings, err = delivery.ReadQueueSettings(ctx, tx); err != nil {
			return err
		}
		if q.Numbers, err = delivery.ReadNumberHealth(ctx, tx); err != nil {
			return err
		}
		if q.Pauses, err = status.ActivePauses(ctx, tx); err != nil {
			return err
		}
		q.Latency.Window = latencyWindow.String()
		latency, err := queueLatencyQuery.One(ctx, tx, queueLatencyArgs{AsOf: asOf, Window: latencyWindow})
		if err != nil {
			return err
		}
		q.Latency.Sent, q.Latency.P50, q.Latency.P95 = latency.Sent, latency.P50, latency.P95
		hours, err := queueThroughputQuery.All(ctx, tx, queueThroughputArgs{AsOf: asOf, Hours: throughputHours})
		if err != nil {
			return err
		}
		q.Throughput = make([]HourCount, len(hours))
		for i, h := range hours {
			q.Throughput[i] = HourCount(h)
		}
		failures, err := queueFailuresQuery.All(ctx, tx, queueFailuresArgs{
			MaxGroups: maxFailureRows, AsOf: asOf, Window: healthWindow, PermanentMark: transport.PermanentMark,
		})
		if err != nil {
			return err
		}
		q.Failures = make([]FailureGroup, len(failures))
		for i, f := range failures {
			q.Failures[i] = FailureGroup{Reason: f.Reason, Key: errorGroupKey(f.Reason), Messages: f.Messages, Kinds: f.Kinds,
				FirstSeen: f.FirstSeen, LastSeen: f.LastSeen, SampleID: f.SampleID, LastDay: f.LastWindow,
				DayBefore: f.WindowBefore, Permanent: f.Permanent, allLastWindow: f.AllLastWindow}
		}
		if len(q.Failures) > 0 {
			q.FailedLastDay = q.Failures[0].allLastWindow
		}
		q.Receipts.Window = "7 days"
		r := &q.Receipts
		if err := queueReceiptsQuery.Each(ctx, tx, queueReceiptsArgs{AsOf: asOf, Window: ReceiptsWindow}, func(row *queueReceiptsRow) error {
			r.Accepted, r.Delivered, r.Read, r.FailedLate = row.Accepted, row.Delivered, row.Read, row.FailedLate
			if row.Code != nil {
				name := *row.Code
				if name == "" {
					name = "no code"
				}
				r.ByCode = append(r.ByCode, CodeCount{Code: name, Meaning: whatsAppCodes[*row.Code], Messages: row.CodeMessages})
			}
			return nil
		}); err != nil {
			return err
		}
		if q.Spend, err = pricing.ReadSpend(ctx, tx, asOf, s.cfg.Prices); err != nil {
			return err
		}
		return nil
	})
	return q, err
}

// cancelled is the queue page's cancelled messages by reason, from
// status's count of them: the reasons that have any, most first, and
// those cancelled without a reason under the empty one.
func cancelled(reasons []status.ReasonCount) []status.ReasonCount {
	out := []status.ReasonCount{}
	for _, r := range reasons {
		if r.Messages == 0 {
			continue
		}
		if r.Reason == status.ReasonUnspecified {
			r.Reason = ""
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b status.ReasonCount) int { return cmp.Compare(b.Messages, a.Messages) })
	return out
}

// Budget is a transport's send budget (queue-process --daily-limit) as
// the queue and forecast pages show it: delivery.ReadBudgets' report, the
// one engagementctl status prints, and how far off its times are.
type Budget struct {
	delivery.BudgetReport
	// NextSlotIn and ClearsIn say how far off NextSlotAt and ClearsAt are
	// ("in 3 h 20 min", "in 2 days"), from the database's clock.
	NextSlotIn string `json:"next_slot_in,omitempty"`
	ClearsIn   string `json:"clears_in,omitempty"`

	clearsAfter time.Duration // ClearsAt - now
}

// Free is how many new recipients the window takes before it is full.
func (b Budget) Free() int { return max(b.Limit-b.Used, 0) }

// Rate says the budget's limit today: "1000 a day", or while a ramp warms
// the number up, "250 today, day 1 of the ramp 250,2 up to 1000".
func (b Budget) Rate() string {
	if b.RampDay == nil {
		return formatInt(int64(b.Limit)) + " a day"
	}
	return fmt.Sprintf("%s today, day %d of the ramp %s up to %s",
		formatInt(int64(b.Limit)), *b.RampDay+1, b.Ramp, formatInt(int64(b.DailyLimit)))
}

// budgets reads the send budgets in the page's transaction. They are what
// queue-process sees now, on the database's clock, whatever the page's
// as-of (a window and a line have no past to look at), so how far off
// their times are is said from that clock too: now(), the transaction's
// start, the instant ReadBudgets read them at. Never nil: the JSON says
// [] rather than null when no queue-process ran with a budget.
func budgets(ctx context.Context, tx pgx.Tx) ([]Budget, error) {
	reports, err := delivery.ReadBudgets(ctx, tx)
	if err != nil {
		return nil, err
	}
	out := make([]Budget, 0, len(reports))
	if len(reports) == 0 {
		return out, nil
	}
	now, err := postgres.Now(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, r := range reports {
		b := Budget{BudgetReport: r}
		if r.NextSlotAt != nil {
			b.NextSlotIn = until(r.NextSlotAt.Sub(now))
		}
		if r.ClearsAt != nil {
			b.clearsAfter = r.ClearsAt.Sub(now)
			b.ClearsIn = until(b.clearsAfter)
		}
		out = append(out, b)
	}
	return out, nil
}

// until says how far off an instant d from now is: in minutes under a
// day, else in whole days rounded up (as engagementctl status says it):
// a line that clears in 30 hours takes a second day.
func until(d time.Duration) string {
	switch {
	case d <= 0:
		return "due now"
	case d < time.Minute:
		return "in under a minute"
	case d < time.Hour:
		return fmt.Sprintf("in %d min", int(d.Round(time.Minute).Minutes()))
	case d < 24*time.Hour:
		m := int(d.Round(time.Minute).Minutes())
		return fmt.Sprintf("in %d h %d min", m/60, m%60)
	}
	n := int(math.Ceil(d.Hours() / 24))
	return fmt.Sprintf("in %d days", n)
}

// Runs is the runs page: the latest RunsPerJob runs of each job, newest
// first, and each job's latest run.
type Runs struct {
	Runs []Run     `json:"runs"`
	Jobs []JobRuns `json:"jobs"`
	AsOf time.Time `json:"as_of"`
}

// JobRuns is one job's line on the runs page: its latest run, and its
// latest that completed (succeeded or partial).
type JobRuns struct {
	Job       string `json:"job"`
	Latest    Run    `json:"latest"`
	Completed *Run   `json:"last_completed,omitempty"`
	// Runs is how many of its runs the page shows.
	Runs int `json:"runs"`
}

// Run is one job run.
type Run struct {
	ID         int64           `json:"id"`
	Job        string          `json:"job"`
	Shard      string          `json:"shard,omitempty"`
	AsOf       time.Time       `json:"as_of"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	Status     string          `json:"status"`
	Counters   json.RawMessage `json:"counters"`
	Error      string          `json:"error,omitempty"`
	// Seconds is how long it ran (so far, while running).
	Seconds float64 `json:"seconds"`
	// Moved is how many users it moved or messages it queued or sent: the
	// counters' processed, or sent for queue-process.
	Moved int64 `json:"moved"`
	// Ago is how long before the page's as-of it started ("3 h ago").
	Ago string `json:"-"`
}

// Summary is the counters' totals in a line: "processed 5 · queued 5".
func (r Run) Summary() string {
	var c map[string]any
	if json.Unmarshal(r.Counters, &c) != nil {
		return ""
	}
	var parts []string
	for _, k := range []string{"processed", "succeeded", "failed", "skipped", "queued", "duplicates", "sent", "retried", "cancelled", "deferred"} {
		if v, ok := c[k].(float64); ok {
			parts = append(parts, fmt.Sprintf("%s %d", k, int64(v)))
		}
	}
	if v, ok := c["stopped"].(string); ok && v != "" { // queue-process stopped before the queue was drained
		parts = append(parts, "stopped: "+v)
	}
	return strings.Join(parts, " · ")
}

// RunsPerJob is how many of each job's latest runs the runs page shows.
const RunsPerJob = 100

func (s *server) runs(r *http.Request) (any, error) {
	var out Runs
	err := s.read(r.Context(), func(tx pgx.Tx, asOf time.Time) error {
		out.AsOf = asOf
		// The latest RunsPerJob of each job and shard hold the latest
		// RunsPerJob of each job, its shards together, that the page shows.
		runs, err := status.ReadRuns(r.Context(), tx, RunsPerJob)
		if err != nil {
			return err
		}
		slices.SortFunc(runs, func(a, b status.Run) int { // newest first
			return cmp.Or(b.StartedAt.Compare(a.StartedAt), cmp.Compare(b.ID, a.ID))
		})
		out.Runs = []Run{}
		shown := map[string]int{}
		for _, row := range runs {
			if shown[row.Job]++; shown[row.Job] > RunsPerJob {
				continue
			}
			run := Run{ID: row.ID, Job: row.Job, Shard: row.Shard, AsOf: row.AsOf, StartedAt: row.StartedAt,
				FinishedAt: row.FinishedAt, Status: row.Status, Counters: row.RawCounters, Error: row.Error}
			if run.Counters == nil { // none recorded
				run.Counters = json.RawMessage(`{}`)
			}
			end := asOf
			if run.FinishedAt != nil {
				end = *run.FinishedAt
			}
			run.Seconds = max(0, end.Sub(run.StartedAt).Seconds())
			run.Moved = moved(run.Job, run.Counters)
			run.Ago = ago(asOf, run.StartedAt)
			out.Runs = append(out.Runs, run)
		}
		out.Jobs = jobRuns(out.Runs)
		return nil
	})
	return out, err
}

// jobRuns is each job's line, from its runs newest first: the daily job,
// the weekly job, queue-process, then any other by name.
func jobRuns(runs []Run) []JobRuns {
	var out []JobRuns
	at := map[string]int{}
	for _, r := range runs {
		i, ok := at[r.Job]
		if !ok {
			i = len(out)
			at[r.Job] = i
			out = append(out, JobRuns{Job: r.Job, Latest: r})
		}
		j := &out[i]
		j.Runs++
		if j.Completed == nil && (r.Status == scheduler.RunSucceeded || r.Status == scheduler.RunPartial) {
			j.Completed = &r
		}
	}
	slices.SortFunc(out, func(a, b JobRuns) int {
		return cmp.Or(cmp.Compare(jobOrder(a.Job), jobOrder(b.Job)), cmp.Compare(a.Job, b.Job))
	})
	return out
}

// moved reads the counters' processed (the jobs) or sent (queue-process,
// whose processed counts retries and failures too).
func moved(job string, counters []byte) int64 {
	var c struct {
		Processed *int64 `json:"processed"`
		Sent      *int64 `json:"sent"`
	}
	if json.Unmarshal(counters, &c) != nil {
		return 0
	}
	switch {
	case job == delivery.Job && c.Sent != nil:
		return *c.Sent
	case c.Processed != nil:
		return *c.Processed
	case c.Sent != nil:
		return *c.Sent
	}
	return 0
}

// Verify is the verify page: engagementctl verify's report.
type Verify struct {
	*verify.Report
}

func (s *server) verify(ctx context.Context) (any, error) {
	var out Verify
	err := s.read(ctx, func(tx pgx.Tx, asOf time.Time) error {
		rep, err := verify.RunTx(ctx, tx, verify.Config{AsOf: asOf})
		out.Report = rep
		return err
	})
	return out, err
}

// User is the user page.
type User struct {
	Query string `json:"-"`
	// Searched is set when the page answers a search (POST /users);
	// Matches are the users found when there are several (or none).
	Searched    bool             `json:"searched,omitempty"`
	Matches     []UserMatch      `json:"matches,omitempty"`
	Found       bool             `json:"found"`
	ID          string           `json:"id,omitempty"`
	State       *UserState       `json:"state,omitempty"`
	Transitions []UserTransition `json:"transitions,omitempty"`
	Messages    []UserMessage    `json:"messages,omitempty"`
	Consent     []ConsentChange  `json:"consent,omitempty"`
}

// ConsentChange is one change of a user's consent to re-engagement
// messages (engagement_consent_events): which way, through which door,
// by which operator (empty: none), when the user said it; or a call older
// than a wish the user made later (Superseded), which changed nothing.
type ConsentChange struct {
	OptedOut   bool      `json:"opted_out"`
	Source     string    `json:"source"`
	Actor      string    `json:"actor,omitempty"`
	At         time.Time `json:"at"`
	Superseded bool      `json:"superseded,omitempty"`
}

// UserState is a user's state, timers and profile; the JID only as its
// last four digits.
type UserState struct {
	State            string     `json:"state"`
	LastActivityAt   *time.Time `json:"last_activity_at"`
	GoodbyeSentAt    *time.Time `json:"goodbye_sent_at"`
	GoodbyeExpiresAt *time.Time `json:"goodbye_expires_at"`
	RemindAt         *time.Time `json:"remind_at"` // remind_later's timer: nil in any other state
	CreatedAt        *time.Time `json:"created_at"`
	OptedOut         bool       `json:"opted_out"`
	Destination      string     `json:"destination"`
	JID              string     `json:"jid"`
	HasProfile       bool       `json:"has_profile"`
	// GoodbyeBackoff is why the user's next goodbye waits after goodbyes
	// that failed for good (nil: it does not).
	GoodbyeBackoff *GoodbyeBackoff `json:"goodbye_backoff,omitempty"`
}

// UserTransition is one move of the user's.
type UserTransition struct {
	ID        int64     `json:"id"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Trigger   string    `json:"trigger"`
	JobRunID  *int64    `json:"job_run_id"`
	CreatedAt time.Time `json:"created_at"`
}

// By says who made the move: a job run, or the bot.
func (t UserTransition) By() string {
	if t.JobRunID != nil {
		return "job"
	}
	return "bot"
}

// UserMessage is one of the user's messages: never its text or JID.
type UserMessage struct {
	ID           string     `json:"id"`
	Kind         string     `json:"kind"`
	Status       string     `json:"status"`
	ScheduledFor time.Time  `json:"scheduled_for"`
	SentAt       *time.Time `json:"sent_at"`
	DeliveredAt  *time.Time `json:"delivered_at"` // by WhatsApp's receipt
	ReadAt       *time.Time `json:"read_at"`      // by WhatsApp's receipt
	RetryCount   int64      `json:"retry_count"`
	CancelReason string     `json:"cancel_reason,omitempty"`
	Error        string     `json:"error,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
}

const maxUserRows = 200

func (s *server) user(r *http.Request) (any, error) {
	out := User{Query: strings.TrimSpace(r.URL.Query().Get("id"))}
	if out.Query == "" {
		return out, nil
	}
	id, ok := postgres.ParseUUID(out.Query)
	if !ok {
		// Not quoted back: it may be a phone number, which belongs in
		// the search form (a POST), not in a URL.
		return nil, badRequestf("that is not a user id (a UUID); to find a user by phone number or JID, use the search form")
	}
	out.ID = id
	return s.userByID(r.Context(), out)
}

// userByID fills in the user out.ID names.
func (s *server) userByID(ctx context.Context, out User) (User, error) {
	err := s.read(ctx, func(tx pgx.Tx, _ time.Time) error {
		row, err := userStateQuery.One(ctx, tx, userStateArgs{UserID: out.ID, GoodbyeKeyInfix: goodbyeKind.KeyInfix})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		st := UserState{State: row.State, LastActivityAt: row.LastActivityAt, GoodbyeSentAt: row.GoodbyeSentAt,
			GoodbyeExpiresAt: row.GoodbyeExpiresAt, RemindAt: row.RemindAt, CreatedAt: row.CreatedAt, OptedOut: row.OptedOut,
			Destination: row.Destination, JID: row.JIDLast4, HasProfile: row.HasProfile,
			GoodbyeBackoff: goodbyeBackoff(row.GoodbyeFailures, row.GoodbyeRetryAt, row.GoodbyeHeld, row.GoodbyeFailureCode)}
		if st.JID != "" {
			st.JID = "••••" + st.JID
		}
		out.Found, out.State = true, &st
		transitions, err := userTransitionsQuery.All(ctx, tx, userTransitionsArgs{UserID: out.ID, Limit: maxUserRows})
		if err != nil {
			return err
		}
		out.Transitions = make([]UserTransition, len(transitions))
		for i, t := range transitions {
			out.Transitions[i] = UserTransition{ID: t.ID, From: t.FromState, To: t.ToState, Trigger: t.Trigger,
				JobRunID: t.JobRunID, CreatedAt: t.CreatedAt}
		}
		messages, err := userMessagesQuery.All(ctx, tx, userMessagesArgs{UserID: out.ID, Limit: maxUserRows})
		if err != nil {
			return err
		}
		out.Messages = make([]UserMessage, len(messages))
		for i, m := range messages {
			out.Messages[i] = UserMessage{ID: m.ID, Kind: m.MessageType, Status: m.Status, ScheduledFor: m.ScheduledFor,
				SentAt: m.SentAt, DeliveredAt: m.DeliveredAt, ReadAt: m.ReadAt, RetryCount: int64(m.RetryCount),
				CancelReason: m.CancelReason, Error: m.Error, CreatedAt: m.CreatedAt}
		}
		consent, err := userConsentQuery.All(ctx, tx, userConsentArgs{UserID: out.ID, Limit: maxUserRows})
		if err != nil {
			return err
		}
		out.Consent = make([]ConsentChange, len(consent))
		for i, c := range consent {
			out.Consent[i] = ConsentChange(c)
		}
		return nil
	})
	return out, err
}

// Forecast is the forecast page: the daily job's dry runs for the coming
// days, over the database as it is now.
type Forecast struct {
	AsOf time.Time     `json:"as_of"`
	Days []ForecastDay `json:"days"`
	// Budgets are the send budgets, for how long the messages waiting on
	// them take to go: the dry runs do not send, the budget's line does.
	Budgets []Budget `json:"budgets"`
	// Cost is what the days' goodbyes cost on Meta's list prices: each
	// one delivered and billed at the goodbye kind's category in the
	// prices' default country (pricing.ForecastGoodbyes).
	Cost pricing.Forecast `json:"cost"`
}

// ForecastDay is one coming day's daily run, as of its scheduled time.
type ForecastDay struct {
	AsOf time.Time `json:"as_of"`
	// Goodbyes, Timeouts and Reminders are what that day's run would do
	// if every run before it ran: the users whose deadline falls after the
	// day before's run and by this one (the first day: every user due by
	// then, overdue ones included). Timeouts include goodbyes that could
	// not be delivered (back to active), and the timeouts of the goodbyes
	// the forecast's own days send (ForecastGoodbyeTimeouts of them).
	Goodbyes  int64 `json:"goodbyes"`
	Timeouts  int64 `json:"timeouts"`
	Reminders int64 `json:"reminders"`
	// ForecastGoodbyeTimeouts is how many of Timeouts are the goodbyes the
	// run ForecastGoodbyeTimeoutDays days before this one sends, none
	// answered: a goodbye's 48 hours start when it is delivered, after its
	// run (at the earliest once queue-process has claimed it; later under
	// quiet hours), so the first run 48 hours after that is three days
	// after its own, when it is delivered within a day.
	ForecastGoodbyeTimeouts int64 `json:"forecast_goodbye_timeouts"`
	// GoodbyesUSD is what the day's goodbyes cost, as Forecast.Cost says;
	// nil when the prices have none for them.
	GoodbyesUSD *float64 `json:"goodbyes_usd"`
	// Steps are the daily job's dry-run counters as of the day, on the
	// database as it is now: cumulative, as if no run came before.
	Steps scheduler.Steps `json:"steps"`
}

// ForecastGoodbyeTimeoutDays is how many days after the run that sends a
// goodbye the forecast has it time out (see ForecastDay): delivered after
// its run and within a day, unanswered, its 48 hours end between the run
// two days after and the next.
const ForecastGoodbyeTimeoutDays = 3

func (s *server) forecast(ctx context.Context) (any, error) {
	var out Forecast
	err := s.dryRun(ctx, func(tx pgx.Tx, asOf time.Time) error {
		out.AsOf = asOf
		var prev ForecastDay
		for day := 1; day <= ForecastDays; day++ {
			at := asOf.Add(time.Duration(day) * 24 * time.Hour)
			steps, err := scheduler.ForecastDaily(ctx, tx, at)
			if err != nil {
				return err
			}
			d := ForecastDay{AsOf: at, Steps: steps}
			for _, st := range steps {
				n := int64(st.Succeeded)
				switch sm.Trigger(st.Name) {
				case sm.Inactivity14d:
					d.Goodbyes = n
				case sm.GoodbyeTimeout:
					d.Timeouts = n
				case sm.ReminderDue:
					d.Reminders = n
				}
			}
			cum := d
			d.Goodbyes, d.Timeouts, d.Reminders = d.Goodbyes-prev.Goodbyes, d.Timeouts-prev.Timeouts, d.Reminders-prev.Reminders
			prev = cum
			d.GoodbyesUSD = pricing.ForecastGoodbyes(d.Goodbyes, s.cfg.Prices).USD
			if sent := day - ForecastGoodbyeTimeoutDays; sent >= 1 {
				d.ForecastGoodbyeTimeouts = out.Days[sent-1].Goodbyes
				d.Timeouts += d.ForecastGoodbyeTimeouts
			}
			out.Days = append(out.Days, d)
		}
		var goodbyes int64
		for _, d := range out.Days {
			goodbyes += d.Goodbyes
		}
		out.Cost = pricing.ForecastGoodbyes(goodbyes, s.cfg.Prices)
		var err error
		out.Budgets, err = budgets(ctx, tx)
		return err
	})
	return out, err
}

// Audit is the audit page: the console's actions, newest first.
type Audit struct {
	Entries []AuditEntry `json:"entries"`
}

// AuditEntry is one action.
type AuditEntry struct {
	ID       int64           `json:"id"`
	At       time.Time       `json:"at"`
	Actor    string          `json:"actor"`
	Action   string          `json:"action"`
	Filter   json.RawMessage `json:"filter"`
	Messages int64           `json:"messages"`
	// Reason is the operator's, empty when none was given.
	Reason string `json:"reason,omitempty"`
}

const maxAuditRows = 500

func (s *server) audit(r *http.Request) (any, error) {
	var out Audit
	err := s.read(r.Context(), func(tx pgx.Tx, _ time.Time) error {
		entries, err := auditQuery.All(r.Context(), tx, auditArgs{Limit: maxAuditRows})
		if err != nil {
			return err
		}
		out.Entries = make([]AuditEntry, len(entries))
		for i, e := range entries {
			out.Entries[i] = AuditEntry{ID: e.ID, At: e.At, Actor: e.Actor, Action: e.Action, Filter: e.Filter,
				Messages: e.Messages, Reason: e.Reason}
		}
		return nil
	})
	return out, err
}

// truncate shortens s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// withHealth completes the overview's snapshot when it is served: the
// health summary from its jobs' latest runs and the queue and verify
// pages' snapshots as they are now. Until those pages' first snapshots are
// computed (in the background, never waited for: verify's takes minutes at
// a million users) their cards say they are being read; an overview
// computed before them shows their numbers as soon as they exist.
func (s *server) withHealth(ctx context.Context, o Overview) (Overview, error) {
	ctx = notAView(ctx)
	var q *Queue
	var v *Verify
	if snap, err := s.caches["queue"].peek(ctx); err != nil {
		return o, err
	} else if snap != nil {
		q = ptr(snap.data.(Queue))
	}
	if snap, err := s.caches["verify"].peek(ctx); err != nil {
		return o, err
	} else if snap != nil {
		v = ptr(snap.data.(Verify))
	}
	o.Health = health(o.AsOf, q, v, o.runs)
	return o, nil
}
