package console

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/status"
)

// The overview's health summary: one card per thing an operator must act
// on, each green, amber or red by a fixed rule that its tooltip states. Its
// numbers are the queue and verify pages' own (their snapshots), and the
// latest run of each job; nothing is counted twice in two ways.

// Health levels. Reading is a card whose numbers are still being read
// for the first time since the console started: neither good nor bad.
const (
	Green   = "green"
	Amber   = "amber"
	Red     = "red"
	Reading = "reading"
)

// The health summary's thresholds (docs/console.md lists them).
const (
	// FailedRedShare: the failures of the last 24 h are red from this
	// share of the messages that settled (were sent or failed) in them.
	FailedRedShare = 0.05
	// LatencyAmber and LatencyRed: the p95 send latency of the last 24 h,
	// or how long the oldest due message has waited, above which the
	// latency card is amber or red.
	LatencyAmber = time.Hour
	LatencyRed   = 6 * time.Hour
	// BudgetRed: messages waiting on the send budget are red when the
	// line takes longer than this to clear.
	BudgetRed = 24 * time.Hour
	// DailyRunRed, WeeklyRunRed: a job's latest run is red when it started
	// longer ago than this (a day and two hours; a week and a day).
	DailyRunRed  = 26 * time.Hour
	WeeklyRunRed = 8 * 24 * time.Hour
	// DeliveryRunAmber, DeliveryRunRed: the same for queue-process, which
	// runs every few minutes or for hours at a stretch.
	DeliveryRunAmber = time.Hour
	DeliveryRunRed   = 6 * time.Hour
	// healthWindow is the window of the failures and latency counted.
	healthWindow = 24 * time.Hour
	// shardSpan is how far before a job's latest run its other shards'
	// latest runs are looked for.
	shardSpan = 12 * time.Hour
)

// DeliveryJob is the job name queue-process records its runs under.
const DeliveryJob = delivery.Job

// healthJobs are the jobs whose latest runs the summary shows, in order.
var healthJobs = []string{scheduler.DailyJob, scheduler.WeeklyJob, DeliveryJob}

// Health is the overview's summary.
type Health struct {
	Cards []HealthCard `json:"cards"`
}

// Worst is the reddest level of the cards.
func (h Health) Worst() string {
	worst := Green
	for _, c := range h.Cards {
		if c.Level == Red {
			return Red
		}
		if c.Level == Amber {
			worst = Amber
		}
	}
	return worst
}

// HealthCard is one line of the summary.
type HealthCard struct {
	// Name identifies the card: failed, budget, latency, verify, or
	// run:<job>.
	Name  string `json:"name"`
	Label string `json:"label"`
	Value string `json:"value"`
	// Detail says more, in a line.
	Detail string `json:"detail,omitempty"`
	// Level is green, amber or red, by Rule.
	Level string `json:"level"`
	// Rule says when the card is green, amber and red.
	Rule string `json:"rule"`
	// Link is the page that shows the numbers.
	Link string `json:"link"`
	// Transport is a pause card's transport (the clear action's); "" on
	// the other cards.
	Transport string `json:"transport,omitempty"`
}

// latestRuns are the runs the summary judges, from the latest run of each
// job and shard (status.ReadRuns, one per job and shard): of each job of
// healthJobs, its shards' latest runs that started within shardSpan of
// the job's latest, so that one failed shard is not hidden behind another
// that ran after it, while a shard that stopped running long ago is left
// out.
func latestRuns(runs []status.Run) []status.Run {
	newest := map[string]time.Time{}
	for _, r := range runs {
		if r.StartedAt.After(newest[r.Job]) {
			newest[r.Job] = r.StartedAt
		}
	}
	var out []status.Run
	for _, job := range healthJobs {
		for _, r := range runs {
			if r.Job == job && !r.StartedAt.Before(newest[job].Add(-shardSpan)) {
				out = append(out, r)
			}
		}
	}
	return out
}

// health builds the summary as of asOf from the queue and verify pages'
// data (nil: not read yet) and the jobs' latest runs.
func health(asOf time.Time, q *Queue, v *Verify, runs []status.Run) Health {
	var h Health
	if q != nil {
		h.Cards = append(h.Cards, q.PauseCards()...)
		h.Cards = append(h.Cards, q.failedHealth(), q.budgetHealth(), q.LatencyHealth())
	} else {
		h.Cards = append(h.Cards, pendingCard("failed", "failed in the last 24 h", "/queue#failures"),
			pendingCard("budget", "waiting on the send budget", "/queue#send-budget"), pendingCard("latency", "send latency p95, last 24 h", "/queue"))
	}
	if v != nil {
		h.Cards = append(h.Cards, verifyHealth(*v))
	} else {
		h.Cards = append(h.Cards, pendingCard("verify", "verify", "/verify"))
	}
	byJob := map[string][]status.Run{}
	for _, r := range runs {
		byJob[r.Job] = append(byJob[r.Job], r)
	}
	for _, job := range healthJobs {
		h.Cards = append(h.Cards, runHealth(asOf, job, byJob[job]))
	}
	return h
}

// PauseCards are a red card per transport paused now (the bot said
// WhatsApp refuses its whole account), saying what to do; none while
// nothing is paused. On the overview's summary and the queue page.
func (q Queue) PauseCards() []HealthCard {
	var cards []HealthCard
	for _, p := range q.Pauses {
		until := "until an operator clears it"
		if p.Until != nil {
			until = "until " + p.Until.UTC().Format("2006-01-02 15:04 UTC")
		}
		cards = append(cards, HealthCard{Name: "pause:" + p.Transport, Label: p.Transport + ": account paused",
			Value: p.Kind, Level: Red, Link: "/queue#pauses", Transport: p.Transport,
			Detail: "nothing is sent " + until + "; the messages wait. What to do: " + p.Advice,
			Rule: "Red while the transport is paused: the bot answered that WhatsApp refuses its whole account " +
				"(reachout_timelock, rate_overlimit, logged_out, banned). Shown only then."})
	}
	return cards
}

// pendingCard is a card whose page's first snapshot is being read.
func pendingCard(name, label, link string) HealthCard {
	return HealthCard{Name: name, Label: label, Link: link, Value: "reading…", Level: Reading,
		Detail: "first read since the console started",
		Rule:   "Not yet known: the page these numbers come from is being read for the first time since the console started; they show at the next refresh."}
}

func (q Queue) failedHealth() HealthCard {
	n := q.FailedLastDay
	settled := n + q.Latency.Sent
	c := HealthCard{Name: "failed", Label: "failed in the last 24 h", Value: formatInt(n), Link: "/queue#failures",
		Rule: fmt.Sprintf("Green: no message failed in the last 24 h. Amber: some did. Red: at least %.0f%% of the messages "+
			"that were sent or failed in the last 24 h failed.", 100*FailedRedShare),
		Level: Green}
	var total int64
	for _, k := range q.Kinds {
		total += q.Count(k, "failed")
	}
	c.Detail = fmt.Sprintf("of %s sent or failed; %s failed in all", formatInt(settled), formatInt(total))
	switch {
	case n > 0 && float64(n) >= FailedRedShare*float64(settled):
		c.Level = Red
	case n > 0:
		c.Level = Amber
	}
	return c
}

func (q Queue) budgetHealth() HealthCard {
	c := HealthCard{Name: "budget", Label: "waiting on the send budget", Value: formatInt(q.Pending.Budget), Link: "/queue#send-budget",
		Rule: fmt.Sprintf("Green: nothing waits on the send budget. Amber: messages wait and the line clears within %s. "+
			"Red: it takes longer.", span(BudgetRed)),
		Level: Green}
	if q.Pending.Budget == 0 {
		c.Detail = "nothing waits"
		return c
	}
	c.Level = Amber
	var longest time.Duration
	var clears string
	for _, b := range q.Budgets {
		if b.ClearsAt != nil && b.clearsAfter >= longest {
			longest, clears = b.clearsAfter, "the line clears "+b.ClearsIn
		}
	}
	c.Detail = cmp.Or(clears, "queue-process moves them as slots free")
	if longest > BudgetRed {
		c.Level = Red
	}
	return c
}

// LatencyHealth is the send latency card, on the overview's summary and
// the queue page.
func (q Queue) LatencyHealth() HealthCard {
	c := HealthCard{Name: "latency", Label: "send latency p95, last 24 h", Value: formatSeconds(q.Latency.P95), Link: "/queue",
		Rule: fmt.Sprintf("Green: the p95 of the last 24 h's sends (from due to sent) and the oldest due message's wait are both "+
			"at most %s. Amber: either is over %s. Red: either is over %s.",
			span(LatencyAmber), span(LatencyAmber), span(LatencyRed)),
		Level: Green}
	if q.Latency.Sent == 0 {
		c.Value = "none sent"
	}
	worst := time.Duration(q.Latency.P95 * float64(time.Second))
	detail := []string{formatInt(q.Latency.Sent) + " sent"}
	if q.Pending.OldestDue != nil {
		wait := q.AsOf.Sub(*q.Pending.OldestDue)
		worst = max(worst, wait)
		detail = append(detail, "oldest due waits "+q.Pending.OldestWait)
	}
	c.Detail = strings.Join(detail, "; ")
	switch {
	case worst > LatencyRed:
		c.Level = Red
	case worst > LatencyAmber:
		c.Level = Amber
	}
	return c
}

func verifyHealth(v Verify) HealthCard {
	c := HealthCard{Name: "verify", Label: "verify", Link: "/verify", Level: Green,
		Rule: "Green: every invariant engagementctl verify checks holds. Red: one or more is broken."}
	if v.Report == nil {
		c.Value, c.Level = "not run", Amber
		return c
	}
	if v.OK {
		c.Value = fmt.Sprintf("all %d hold", len(v.Checks))
		return c
	}
	c.Value, c.Level = fmt.Sprintf("%d broken", len(v.Broken)), Red
	c.Detail = strings.Join(v.Broken, ", ")
	return c
}

// runHealth is the card of a job's latest runs (one per shard).
func runHealth(asOf time.Time, job string, ran []status.Run) HealthCard {
	amber, red := runLimits(job)
	c := HealthCard{Name: "run:" + job, Label: job, Link: "/runs", Level: Green, Rule: runRule(amber, red)}
	if len(ran) == 0 {
		c.Value, c.Detail = "no run recorded", ""
		c.Level = Red
		if amber > 0 {
			c.Level = Amber
		}
		return c
	}
	c.Level = runsLevel(asOf, ran, amber, red)
	latest := ran[0]
	for _, r := range ran {
		if r.StartedAt.After(latest.StartedAt) {
			latest = r
		}
	}
	c.Value = latest.Status
	c.Detail = "started " + ago(asOf, latest.StartedAt)
	if latest.AsOf.After(latest.StartedAt.Add(simulatedAhead)) {
		// A run simulated ahead (--as-of, --allow-future-as-of: the
		// demo's days 2 and 3) is judged by its as-of, and said so: a
		// green card "started 2 days ago" contradicts its own rule.
		c.Detail = "as of " + ago(asOf, latest.AsOf) + " (simulated ahead; started " + ago(asOf, latest.StartedAt) + ")"
	}
	if len(ran) > 1 {
		c.Detail += fmt.Sprintf(" · %d shards", len(ran))
		for _, r := range ran {
			if r.Status != latest.Status {
				c.Value = "shards differ"
			}
		}
	}
	if latest.Error != "" {
		c.Detail += " · " + truncate(latest.Error, 80)
	}
	return c
}

// runLimits are how long ago a job's latest run may have started before
// its card is amber (0: never for its age) and red.
func runLimits(job string) (amber, red time.Duration) {
	switch job {
	case scheduler.WeeklyJob:
		return 0, WeeklyRunRed
	case DeliveryJob:
		return DeliveryRunAmber, DeliveryRunRed
	}
	return 0, DailyRunRed
}

// runRule is a run card's rule, for its limits.
func runRule(amber, red time.Duration) string {
	rule := fmt.Sprintf("Green: the latest run succeeded (or is running) and started at most %s ago. ", span(red))
	if amber > 0 {
		rule = fmt.Sprintf("Green: the latest run succeeded (or is running) and started at most %s ago. Amber: over %s ago, "+
			"or no run recorded. ", span(amber), span(amber))
	}
	rule += fmt.Sprintf("Amber: it was partial, or stopped (SIGTERM: the next run does the rest). Red: it failed or was abandoned, or it started over %s ago", span(red))
	if amber == 0 {
		rule += ", or there is none"
	}
	return rule + ". Of a sharded job, the worst shard's."
}

// runsLevel is the worst of a job's latest runs (a shard each).
func runsLevel(asOf time.Time, ran []status.Run, amber, red time.Duration) string {
	out := Green
	level := func(l string) {
		if l == Red || (l == Amber && out == Green) {
			out = l
		}
	}
	for _, r := range ran {
		started := r.StartedAt
		if r.AsOf.After(started) {
			started = r.AsOf
		}
		age := asOf.Sub(started)
		switch {
		case r.Status == "failed" || r.Status == "abandoned":
			level(Red)
		case scheduler.RunInProgress(r.Status): // a job's running, queue-process's delivering
		case age > red:
			level(Red)
		case amber > 0 && age > amber:
			level(Amber)
		}
		if r.Status == scheduler.RunPartial || r.Status == scheduler.RunStopped {
			level(Amber) // a stop is no failure, but the run's work is not all done
		}
	}
	return out
}

// simulatedAhead is how far a run's as-of must be past its start for the
// run to be a simulation (--allow-future-as-of): the binaries accept an
// --as-of up to 5 minutes ahead without it, as clock skew.
const simulatedAhead = 5 * time.Minute

// ago says when t was, from asOf: "3 h 20 min ago", "2 days ago".
func ago(asOf, t time.Time) string {
	d := asOf.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		m := int(d.Minutes())
		return fmt.Sprintf("%d h %d min ago", m/60, m%60)
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

// span says a threshold in whole units: "26 h", "8 days", "90 min".
func span(d time.Duration) string {
	switch {
	case d >= 48*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	}
	return fmt.Sprintf("%d min", d/time.Minute)
}
