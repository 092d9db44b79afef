package console

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// Chart is what console.js draws with uPlot: one x axis of instants and
// its series. Pages hand it over in a data-chart attribute (no inline
// script: the Content-Security-Policy forbids it).
type Chart struct {
	// Kind is "line", "bars" (one set of bars, or sets each smaller than
	// the one before, drawn over it), "stacked" (stacked areas) or
	// "stackedbars".
	Kind string  `json:"kind"`
	X    []int64 `json:"x"` // unix seconds, or plain numbers with Numbered
	// Numbered says X are not instants but numbers.
	Numbered bool `json:"numbered,omitempty"`
	// XLabel names the x axis when it is not time.
	XLabel string `json:"x_label,omitempty"`
	// Weekly says each X is the Monday 00:00 UTC of an ISO week (a
	// cohort): the axis puts its ticks on them, labelled with the day.
	Weekly bool     `json:"weekly,omitempty"`
	Series []Series `json:"series"`
	// Unit labels the y axis.
	Unit string `json:"unit"`
	// Note is said under the chart (what a dashed line means).
	Note string `json:"note,omitempty"`
}

// Series is one line or set of bars.
type Series struct {
	Label string `json:"label"`
	// Values has one value per X; nil (null in the JSON) is none there: a
	// gap, or with SpanGaps a point the line passes by.
	Values []*float64 `json:"values"`
	Color  string     `json:"color"`
	// Axis is "y2" for a series on the right axis (the funnel's share
	// reactivated), never stacked; Percent says its values are shares (0
	// to 1).
	Axis    string `json:"axis,omitempty"`
	Percent bool   `json:"percent,omitempty"`
	// Dashed draws the line dashed and lighter: figures still counting.
	Dashed bool `json:"dashed,omitempty"`
	// SpanGaps joins the line across the X without a value (a job's runs
	// on an axis shared with other jobs' runs).
	SpanGaps bool `json:"span_gaps,omitempty"`
}

// value is v as a Series value.
func value[T int64 | float64](v T) *float64 {
	f := float64(v)
	return &f
}

// colors of the states and outcomes, the same in every chart and card.
var colors = map[string]string{
	"active": "#2e7d32", "goodbye_sent": "#f9a825", "help_flow": "#1565c0", "remind_later": "#6a1b9a",
	"dormant": "#757575",
}

func unix(times []time.Time) []int64 {
	out := make([]int64, len(times))
	for i, t := range times {
		out[i] = t.Unix()
	}
	return out
}

func statesChart(o Overview) Chart {
	c := Chart{Kind: "stacked", Unit: "users"}
	var at []time.Time
	for _, w := range o.Weeks {
		at = append(at, w.At)
	}
	c.X = unix(at)
	for _, st := range o.StateList {
		s := Series{Label: st, Color: colors[st]}
		for _, w := range o.Weeks {
			s.Values = append(s.Values, value(w.Users[st]))
		}
		c.Series = append(c.Series, s)
	}
	return c
}

// funnelChart stacks each cohort's goodbyes by outcome (they add up to
// the cohort), with the share reactivated within 30 days on the right: a
// solid line over the cohorts whose 30 days are over, dashed and lighter
// over the cohorts still counting (their share can only grow), joined at
// the last closed one. X are the cohorts' Mondays.
func funnelChart(o Overview) Chart {
	c := Chart{Kind: "stackedbars", Unit: "goodbyes", Weekly: true}
	var at []time.Time
	series := []struct {
		label, color string
		v            func(Cohort) int64
	}{
		{"came back", "#2e7d32", func(c Cohort) int64 { return c.CameBack }},
		{"answered help", "#1565c0", func(c Cohort) int64 { return c.AnsweredHelp }},
		{"remind later", "#6a1b9a", func(c Cohort) int64 { return c.AnsweredRemindLater }},
		{"not now", "#8d6e63", func(c Cohort) int64 { return c.AnsweredNotNow }},
		{"timed out", "#757575", func(c Cohort) int64 { return c.TimedOut }},
		{"undelivered", "#c62828", func(c Cohort) int64 { return c.Undelivered }},
		{"waiting", "#f9a825", func(c Cohort) int64 { return c.Waiting }},
	}
	for _, w := range o.Funnel {
		at = append(at, w.WeekStart)
	}
	c.X = unix(at)
	for _, s := range series {
		out := Series{Label: s.label, Color: s.color}
		for _, w := range o.Funnel {
			out.Values = append(out.Values, value(s.v(w)))
		}
		c.Series = append(c.Series, out)
	}
	closed := Series{Label: "reactivated ≤30 d", Color: "#00897b", Axis: "y2", Percent: true}
	open := Series{Label: "reactivated so far (30 d not over)", Color: "#80cbc4", Axis: "y2", Percent: true, Dashed: true}
	lastClosed := -1
	for i, w := range o.Funnel {
		if w.WindowClosed {
			lastClosed = i
		}
	}
	for i, w := range o.Funnel {
		var cl, op *float64
		if w.WindowClosed {
			cl = value(w.ReactivatedShare)
		} else {
			op = value(w.ReactivatedShare)
		}
		if i == lastClosed && i < len(o.Funnel)-1 {
			op = value(w.ReactivatedShare) // the dashed line starts where the solid one ends
		}
		closed.Values, open.Values = append(closed.Values, cl), append(open.Values, op)
	}
	c.Series = append(c.Series, closed)
	if lastClosed < len(o.Funnel)-1 {
		c.Series = append(c.Series, open)
		c.Note = "Dashed: cohorts whose 30 days are not over yet (* in the table); their share can still grow."
	}
	return c
}

func reviewsChart(o Overview) Chart {
	c := Chart{Kind: "bars", Unit: "reviews", Weekly: true}
	var at []time.Time
	queued, sent := Series{Label: "queued", Color: "#90caf9"}, Series{Label: "sent", Color: "#1565c0"}
	for _, w := range o.Reviews {
		at = append(at, w.WeekStart)
		queued.Values = append(queued.Values, value(w.Queued))
		sent.Values = append(sent.Values, value(w.Sent))
	}
	c.X, c.Series = unix(at), []Series{queued, sent}
	return c
}

func throughputChart(q Queue) Chart {
	c := Chart{Kind: "bars", Unit: "messages"}
	var at []time.Time
	sent := Series{Label: "sent", Color: "#2e7d32"}
	for _, h := range q.Throughput {
		at = append(at, h.Hour)
		sent.Values = append(sent.Values, value(h.Sent))
	}
	c.X, c.Series = unix(at), []Series{sent}
	return c
}

// jobColors are the jobs' lines on the runs page; other jobs (and the
// shards of a sharded one) take the next of runColors.
var (
	jobColors = map[string]string{
		scheduler.DailyJob: "#1565c0", scheduler.WeeklyJob: "#6a1b9a", delivery.Job: "#2e7d32",
	}
	runColors = []string{"#ef6c00", "#00838f", "#ad1457", "#5d4037", "#9e9d24", "#455a64"}
)

// runSeries names the line a run belongs to: its job, and its shard when
// it ran one ("engagement-daily 1/3").
func runSeries(r Run) string {
	if r.Shard != "" {
		return r.Job + " " + r.Shard
	}
	return r.Job
}

// runsCharts plots each run by when it started, one line per job (and
// shard): how long each run took, and what it did (users moved, reviews
// queued, messages sent). Each line joins its own runs across the other
// jobs' instants, so a job that stopped running shows where its line ends.
func runsCharts(r Runs) []Chart {
	var names []string
	byName := map[string][]int{}            // a line's runs, by their index in r.Runs
	for i := len(r.Runs) - 1; i >= 0; i-- { // oldest first
		n := runSeries(r.Runs[i])
		if _, ok := byName[n]; !ok {
			names = append(names, n)
		}
		byName[n] = append(byName[n], i)
	}
	slices.SortStableFunc(names, func(a, b string) int { return cmp.Compare(jobOrder(a), jobOrder(b)) })
	took := Chart{Kind: "line", Unit: "seconds"}
	did := Chart{Kind: "line", Unit: "users or messages"}
	for i := len(r.Runs) - 1; i >= 0; i-- {
		took.X = append(took.X, r.Runs[i].StartedAt.Unix())
	}
	did.X = took.X
	next := 0
	for _, n := range names {
		color, ok := jobColors[n]
		if !ok {
			color = runColors[next%len(runColors)]
			next++
		}
		t := Series{Label: n, Color: color, SpanGaps: true, Values: make([]*float64, len(r.Runs))}
		d := Series{Label: n, Color: color, SpanGaps: true, Values: make([]*float64, len(r.Runs))}
		for _, i := range byName[n] {
			x := len(r.Runs) - 1 - i
			t.Values[x], d.Values[x] = value(r.Runs[i].Seconds), value(r.Runs[i].Moved)
		}
		took.Series, did.Series = append(took.Series, t), append(did.Series, d)
	}
	return []Chart{took, did}
}

// jobOrder puts the daily job's line first, then the weekly job's, then
// queue-process's, then any other.
func jobOrder(series string) int {
	for i, job := range []string{scheduler.DailyJob, scheduler.WeeklyJob, delivery.Job} {
		if series == job || strings.HasPrefix(series, job+" ") {
			return i
		}
	}
	return 3
}

func forecastChart(f Forecast) Chart {
	c := Chart{Kind: "stackedbars", Unit: "users"}
	var at []time.Time
	for _, d := range f.Days {
		at = append(at, d.AsOf)
	}
	for i, t := range f.Timers {
		sr := Series{Label: t.Label, Color: forecastColors[i%len(forecastColors)]}
		for _, d := range f.Days {
			sr.Values = append(sr.Values, value(d.Moves[t.Trigger]))
		}
		c.Series = append(c.Series, sr)
	}
	c.X = unix(at)
	return c
}

// forecastColors are the forecast's series' colours, a timer each, in
// the daily job's order.
var forecastColors = []string{"#f9a825", "#757575", "#6a1b9a", "#00897b", "#c62828", "#1565c0"}
