package console

import "time"

// Chart is what console.js draws with uPlot: one x axis of instants and
// its series. Pages hand it over in a data-chart attribute (no inline
// script: the Content-Security-Policy forbids it).
type Chart struct {
	// Kind is "line", "bars" (one set of bars, or sets each smaller than
	// the one before, drawn over it), "stacked" (stacked areas) or
	// "stackedbars".
	Kind string  `json:"kind"`
	X    []int64 `json:"x"` // unix seconds, or plain numbers with Numbered
	// Numbered says X are not instants but numbers (run ids).
	Numbered bool `json:"numbered,omitempty"`
	// XLabel names the x axis when it is not time.
	XLabel string   `json:"x_label,omitempty"`
	Series []Series `json:"series"`
	// Unit labels the y axis.
	Unit string `json:"unit"`
}

// Series is one line or set of bars.
type Series struct {
	Label  string    `json:"label"`
	Values []float64 `json:"values"`
	Color  string    `json:"color"`
	// Axis is "y2" for a series on the right axis (the runs' users moved),
	// never stacked; Percent says its values are shares (0 to 1).
	Axis    string `json:"axis,omitempty"`
	Percent bool   `json:"percent,omitempty"`
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
			s.Values = append(s.Values, float64(w.Users[st]))
		}
		c.Series = append(c.Series, s)
	}
	return c
}

// funnelChart stacks each cohort's goodbyes by outcome (they add up to
// the cohort), with the share reactivated within 30 days on the right.
func funnelChart(o Overview) Chart {
	c := Chart{Kind: "stackedbars", Unit: "goodbyes"}
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
			out.Values = append(out.Values, float64(s.v(w)))
		}
		c.Series = append(c.Series, out)
	}
	share := Series{Label: "reactivated ≤30 d", Color: "#00897b", Axis: "y2", Percent: true}
	for _, w := range o.Funnel {
		share.Values = append(share.Values, w.ReactivatedShare)
	}
	c.Series = append(c.Series, share)
	return c
}

func reviewsChart(o Overview) Chart {
	c := Chart{Kind: "bars", Unit: "reviews"}
	var at []time.Time
	queued, sent := Series{Label: "queued", Color: "#90caf9"}, Series{Label: "sent", Color: "#1565c0"}
	for _, w := range o.Reviews {
		at = append(at, w.WeekStart)
		queued.Values = append(queued.Values, float64(w.Queued))
		sent.Values = append(sent.Values, float64(w.Sent))
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
		sent.Values = append(sent.Values, float64(h.Sent))
	}
	c.X, c.Series = unix(at), []Series{sent}
	return c
}

// runsChart plots each run's duration and users moved by run id: runs of
// a test or a catch-up come seconds apart, days apart otherwise.
func runsChart(r Runs) Chart {
	c := Chart{Kind: "line", Unit: "seconds", Numbered: true, XLabel: "run"}
	took := Series{Label: "duration (s)", Color: "#1565c0"}
	moved := Series{Label: "moved", Color: "#f9a825", Axis: "y2"}
	for i := len(r.Runs) - 1; i >= 0; i-- { // oldest first
		run := r.Runs[i]
		c.X = append(c.X, run.ID)
		took.Values = append(took.Values, run.Seconds)
		moved.Values = append(moved.Values, float64(run.Moved))
	}
	c.Series = []Series{took, moved}
	return c
}

func forecastChart(f Forecast) Chart {
	c := Chart{Kind: "stackedbars", Unit: "users"}
	var at []time.Time
	g, t, r := Series{Label: "goodbyes", Color: "#f9a825"}, Series{Label: "timeouts", Color: "#757575"},
		Series{Label: "reminders due", Color: "#6a1b9a"}
	for _, d := range f.Days {
		at = append(at, d.AsOf)
		g.Values = append(g.Values, float64(d.Goodbyes))
		t.Values = append(t.Values, float64(d.Timeouts))
		r.Values = append(r.Values, float64(d.Reminders))
	}
	c.X, c.Series = unix(at), []Series{g, t, r}
	return c
}

func init() {
	funcs["statesChart"] = statesChart
	funcs["funnelChart"] = funnelChart
	funcs["reviewsChart"] = reviewsChart
	funcs["throughputChart"] = throughputChart
	funcs["runsChart"] = runsChart
	funcs["forecastChart"] = forecastChart
}
