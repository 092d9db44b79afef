package delivery

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// What queue-process runs with, seen at a glance (issue 46). Every run
// records its transport's settings (as it worked them out at its start,
// once it had read Meta's verdict and its pace) when its workers are done (engagement_queue_settings,
// migration 63, settings_save.sql): the console's queue page and
// engagementctl status have none of queue-process's flags, so they read
// what the last run on each transport recorded (ReadQueueSettings), and
// Meta's verdict as the runs and the console's webhook recorded it
// (ReadNumberHealth). Processes on one transport with different flags:
// the last to finish wins; RecordedAt says when that was.

// QueueSettings is what the last queue-process run on a transport ran
// with. Durations are in seconds.
type QueueSettings struct {
	Transport string `json:"transport"`
	// KindPriority is --kind-priority ([] when off: oldest due first);
	// KindPriorityMaxWait how long a message waits at most before it goes
	// first whatever its kind.
	KindPriority        []string `json:"kind_priority"`
	KindPriorityMaxWait float64  `json:"kind_priority_max_wait_seconds"`
	// PerUserCap is --per-user-cap (0: none) over PerUserCapWindow.
	PerUserCap       int     `json:"per_user_cap"`
	PerUserCapWindow float64 `json:"per_user_cap_window_seconds"`
	// SendInterval is --send-interval (0: no pacing); LeastGap the least
	// gap the run kept (SendInterval, or more with --spread-budget);
	// SendJitter the most added to it at random.
	SendInterval float64 `json:"send_interval_seconds"`
	LeastGap     float64 `json:"least_gap_seconds"`
	SendJitter   float64 `json:"send_jitter_seconds"`
	SpreadBudget bool    `json:"spread_budget"`
	// WakingHours is the day less the quiet hours; PaceFits whether the
	// day's budget fits in them at the pace (null without a budget or
	// pacing).
	WakingHours float64 `json:"waking_seconds"`
	PaceFits    *bool   `json:"pace_fits"`
	// DailyLimit is the send budget's limit the run started with (0:
	// none); DailyLimitAuto says it followed Meta's tier.
	DailyLimit     int       `json:"daily_limit"`
	DailyLimitAuto bool      `json:"daily_limit_auto"`
	QuietHours     string    `json:"quiet_hours,omitempty"`
	Timezone       string    `json:"timezone,omitempty"`
	RecordedAt     time.Time `json:"recorded_at"`
}

// NumberReport is Meta's verdict on a transport's number as recorded: the
// quality rating and messaging limit tier, the flag, when and where from
// they were last read (graph_api: a queue-process run; webhook: the
// console's), and the templates' statuses (the Cloud API's).
type NumberReport struct {
	Transport          string     `json:"transport"`
	QualityRating      string     `json:"quality_rating,omitempty"`
	MessagingLimitTier string     `json:"messaging_limit_tier,omitempty"`
	Flagged            bool       `json:"flagged"`
	ReadAt             *time.Time `json:"read_at"`
	Source             string     `json:"source,omitempty"`
	// Holding says the marketing kinds wait (RED or FLAGGED).
	Holding bool `json:"holding_marketing"`
	// PausedTemplates are the templates Meta holds (PAUSED, DISABLED);
	// Templates every template's status Meta's webhook sent, held first.
	PausedTemplates []string        `json:"paused_templates"`
	Templates       []TemplateState `json:"templates"`
}

// TemplateState is a template's status as Meta's webhook last said it.
type TemplateState struct {
	Name      string    `json:"name"`
	Status    string    `json:"status"`
	Held      bool      `json:"held"`
	UpdatedAt time.Time `json:"updated_at"`
}

// MaxTemplates bounds the templates a NumberReport lists.
const MaxTemplates = 50

// recordSettings records what the run runs with (see above). A failure
// is logged and the run goes on: nothing it sends depends on the record.
func (r *run) recordSettings(ctx context.Context) {
	c := r.cfg
	priority := c.KindPriority
	if priority == nil {
		priority = []string{}
	}
	var quiet, zone *string
	if c.QuietHours.Set() {
		q := c.QuietHours.String()
		quiet, zone = &q, &c.Timezone
	}
	var fits *bool
	var least, jitter time.Duration
	waking := wakingHours(c.QuietHours)
	send := time.Duration(0)
	if r.pacer != nil {
		send, least, jitter, waking = c.SendInterval, r.plan.Interval, r.plan.Jitter, r.plan.Waking
		if r.plan.Limit > 0 {
			fits = &r.plan.Fits
		}
	}
	capWindow := time.Duration(0)
	if c.PerUserCap > 0 {
		capWindow = c.PerUserCapWindow
	}
	maxWait := time.Duration(0)
	if len(priority) > 0 {
		maxWait = c.KindPriorityMaxWait
	}
	limit := c.DailyLimit
	if r.budget != nil {
		limit = r.budget.limitNow()
	}
	if _, err := settingsSaveQuery.Exec(ctx, r.pool, settingsSaveArgs{
		Transport: c.Transport.Name(), KindPriority: priority, KindPriorityMaxWait: maxWait,
		PerUserCap: max(c.PerUserCap, 0), PerUserCapWindow: capWindow, SendInterval: send,
		LeastGap: least, SendJitter: jitter, SpreadBudget: c.SpreadBudget && r.pacer != nil,
		WakingHours: waking, PaceFits: fits, DailyLimit: max(limit, 0), DailyLimitAuto: c.DailyLimitAuto,
		QuietHours: quiet, Timezone: zone, ClockOffset: c.ClockOffset,
	}); err != nil {
		r.log.Warn().Err(err).Msg("could not record the run's settings for the console and engagementctl status; sending anyway")
	}
}

// ReadQueueSettings reads what the last queue-process run on each
// transport ran with (settings.sql), by transport name; none when no run
// recorded any.
func ReadQueueSettings(ctx context.Context, db postgres.Querier) ([]QueueSettings, error) {
	out := []QueueSettings{}
	err := settingsQuery.Each(ctx, db, sqlfile.None{}, func(r *settingsRow) error {
		out = append(out, QueueSettings{Transport: r.Transport, KindPriority: r.KindPriority,
			KindPriorityMaxWait: r.KindPriorityMaxWaitSeconds, PerUserCap: r.PerUserCap,
			PerUserCapWindow: r.PerUserCapWindowSeconds, SendInterval: r.SendIntervalSeconds,
			LeastGap: r.LeastGapSeconds, SendJitter: r.SendJitterSeconds, SpreadBudget: r.SpreadBudget,
			WakingHours: r.WakingSeconds, PaceFits: r.PaceFits, DailyLimit: r.DailyLimit,
			DailyLimitAuto: r.DailyLimitAuto, QuietHours: deref(r.QuietHours), Timezone: deref(r.Timezone),
			RecordedAt: r.RecordedAt})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the queue's settings: %w", err)
	}
	return out, nil
}

// ReadNumberHealth reads Meta's verdict as recorded (health_report.sql,
// templates.sql): a report per transport whose number health a run or
// the webhook recorded; none when nothing was.
func ReadNumberHealth(ctx context.Context, db postgres.Querier) ([]NumberReport, error) {
	templates := []TemplateState{}
	paused := []string{}
	err := templatesQuery.Each(ctx, db, templatesArgs{MaxTemplates: MaxTemplates}, func(t *templatesRow) error {
		templates = append(templates, TemplateState{Name: t.TemplateName, Status: t.Status, Held: t.Held, UpdatedAt: t.UpdatedAt})
		if t.Held {
			paused = append(paused, t.TemplateName)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the templates' statuses: %w", err)
	}
	out := []NumberReport{}
	err = healthReportQuery.Each(ctx, db, healthReportArgs{CloudTransport: transport.WhatsAppName}, func(h *healthReportRow) error {
		r := NumberReport{Transport: h.Transport, QualityRating: deref(h.QualityRating),
			MessagingLimitTier: deref(h.MessagingLimitTier), Flagged: h.Flagged, ReadAt: h.ReadAt, Source: deref(h.Source)}
		r.Holding = r.QualityRating == "RED" || r.Flagged
		r.PausedTemplates, r.Templates = []string{}, []TemplateState{}
		if r.Transport == transport.WhatsAppName {
			r.PausedTemplates, r.Templates = paused, templates
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the number's health: %w", err)
	}
	return out, nil
}

// Order says the order in words: "goodbye, reminder, then the rest;
// oldest due first within each; a message queued 3 days ago goes first
// whatever its kind", or "oldest due first, whatever the kind".
func (s QueueSettings) Order() string {
	if len(s.KindPriority) == 0 {
		return "oldest due first, whatever the kind"
	}
	return fmt.Sprintf("%s, then the rest; oldest due first within each; one queued %s ago goes first whatever its kind",
		strings.Join(s.KindPriority, ", "), span(s.KindPriorityMaxWait))
}

// Cap says the per-user cap in words: "at most 1 marketing message per
// user in any 7 days", or "none".
func (s QueueSettings) Cap() string {
	if s.PerUserCap <= 0 {
		return "none"
	}
	noun := "messages"
	if s.PerUserCap == 1 {
		noun = "message"
	}
	return fmt.Sprintf("at most %d marketing %s per user in any %s", s.PerUserCap, noun, span(s.PerUserCapWindow))
}

// Pace says the pace in words: the least gap, the jitter, the spread and
// whether the day's budget fits in the waking hours at it.
func (s QueueSettings) Pace() string {
	if s.SendInterval <= 0 && s.LeastGap <= 0 {
		return "unpaced: as fast as the transport takes"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "a send every %s at least", span(s.LeastGap))
	if s.SendJitter > 0 {
		fmt.Fprintf(&b, ", plus up to %s at random", span(s.SendJitter))
	}
	if s.SpreadBudget {
		fmt.Fprintf(&b, "; the day's budget spread over the %s of waking hours, never below --send-interval %s", span(s.WakingHours), span(s.SendInterval))
	}
	if s.PaceFits != nil && !*s.PaceFits {
		fmt.Fprintf(&b, "; the day's budget does not fit in the %s of waking hours at this pace", span(s.WakingHours))
	}
	return b.String()
}

// Health says the number's health in words: rating, tier, flag, the
// templates Meta holds.
func (r NumberReport) Health() string {
	var b strings.Builder
	fmt.Fprintf(&b, "quality %s, messaging limit %s", cmp.Or(r.QualityRating, "not read yet"), cmp.Or(r.MessagingLimitTier, "not read yet"))
	if r.Flagged {
		b.WriteString(", FLAGGED")
	}
	if r.Holding {
		b.WriteString("; marketing kinds wait (quality)")
	}
	if len(r.PausedTemplates) > 0 {
		fmt.Fprintf(&b, "; paused templates: %s", strings.Join(r.PausedTemplates, ", "))
	}
	return b.String()
}

// span says a number of seconds as people do: "500 ms", "45 s",
// "1 min 54 s", "13 h", "7 days".
func span(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d <= 0:
		return "0 s"
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", d.Seconds()), "0"), ".") + " s"
	case d < time.Hour:
		m, s := int(d/time.Minute), int(d%time.Minute/time.Second)
		if s == 0 {
			return fmt.Sprintf("%d min", m)
		}
		return fmt.Sprintf("%d min %d s", m, s)
	case d < 48*time.Hour && d%(24*time.Hour) != 0:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	case d%(24*time.Hour) == 0:
		if d == 24*time.Hour {
			return "1 day"
		}
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	return fmt.Sprintf("%d h", int(d.Round(time.Hour)/time.Hour))
}

// Level says how worried to be about the number: "green", "amber"
// (YELLOW, or a paused template), "red" (RED or FLAGGED: marketing waits)
// or "reading" (no rating read yet).
func (r NumberReport) Level() string {
	switch {
	case r.Holding:
		return "red"
	case r.QualityRating == "YELLOW" || len(r.PausedTemplates) > 0:
		return "amber"
	case r.QualityRating == "GREEN":
		return "green"
	}
	return "reading"
}

// TierLimit is the unique users a day the tier allows (0: unknown).
func (r NumberReport) TierLimit() int {
	n, _ := transport.TierLimit(r.MessagingLimitTier)
	return n
}

// From says where the values were last read from: "the Graph API (a
// queue-process run)" or "Meta's webhook (the console)".
func (r NumberReport) From() string {
	switch r.Source {
	case "graph_api":
		return "the Graph API (a queue-process run)"
	case "webhook":
		return "Meta's webhook (the console)"
	case "":
		return "nowhere yet"
	}
	return r.Source
}
