package console

import (
	"cmp"
	"context"
	"encoding/base64"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/pricing"
	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/status"
)

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

func (s *server) queue(ctx context.Context, src source) (Queue, error) {
	q := Queue{matrix: map[[2]string]int64{}, ThroughputHours: throughputHours}
	err := src.read(ctx, func(tx pgx.Tx, asOf time.Time) error {
		q.AsOf = asOf
		for _, read := range []func(context.Context, pgx.Tx, time.Time) error{
			q.readCounts, q.readTransports, q.readSent, q.readFailures, q.readReceipts,
		} {
			if err := read(ctx, tx, asOf); err != nil {
				return err
			}
		}
		var err error
		q.Spend, err = pricing.ReadSpend(ctx, tx, asOf, s.cfg.Prices)
		return err
	})
	return q, err
}

// readCounts reads the messages by kind and status, what waits and why,
// and the cancelled by reason.
func (q *Queue) readCounts(ctx context.Context, tx pgx.Tx, asOf time.Time) error {
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
	if p := &q.Pending; p.OldestDue != nil {
		p.OldestWait = formatSeconds(asOf.Sub(*p.OldestDue).Seconds())
	}
	return nil
}

// readTransports reads what queue-process's transports run with: the send
// budgets, the settings, the number's health and the pauses.
func (q *Queue) readTransports(ctx context.Context, tx pgx.Tx, _ time.Time) error {
	var err error
	if q.Budgets, err = budgets(ctx, tx); err != nil {
		return err
	}
	if q.Settings, err = delivery.ReadQueueSettings(ctx, tx); err != nil {
		return err
	}
	if q.Numbers, err = delivery.ReadNumberHealth(ctx, tx); err != nil {
		return err
	}
	q.Pauses, err = status.ActivePauses(ctx, tx)
	return err
}

// readSent reads the send latency and the throughput by hour.
func (q *Queue) readSent(ctx context.Context, tx pgx.Tx, asOf time.Time) error {
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
	return nil
}

// readFailures reads the failed messages by reason.
func (q *Queue) readFailures(ctx context.Context, tx pgx.Tx, asOf time.Time) error {
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
	return nil
}

// readReceipts reads WhatsApp's receipts for the last ReceiptsWindow.
func (q *Queue) readReceipts(ctx context.Context, tx pgx.Tx, asOf time.Time) error {
	r := &q.Receipts
	r.Window = "7 days"
	return queueReceiptsQuery.Each(ctx, tx, queueReceiptsArgs{AsOf: asOf, Window: ReceiptsWindow}, func(row *queueReceiptsRow) error {
		r.Accepted, r.Delivered, r.Read, r.FailedLate = row.Accepted, row.Delivered, row.Read, row.FailedLate
		if row.Code != nil {
			name := *row.Code
			if name == "" {
				name = "no code"
			}
			r.ByCode = append(r.ByCode, CodeCount{Code: name, Meaning: whatsAppCodes[*row.Code], Messages: row.CodeMessages})
		}
		return nil
	})
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
