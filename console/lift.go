package console

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"time"

	"github.com/engagement-scheduler/engagement/funnel"
)

// ciWidth is the width, in pixels, of an interval's bar on the overview.
const ciWidth = 160

// CIBar is a difference and its 95 % interval drawn on the overview: x
// positions in pixels on a bar of ciWidth whose middle is zero and whose
// ends are ± the report's scale. The page draws it as an SVG (the
// Content-Security-Policy allows no inline style).
type CIBar struct {
	Known              bool
	Zero, Lo, Width, D float64
	// Class is "up" for an interval above zero, "down" below, "open"
	// across it.
	Class string
}

// liftScale is the points either side of zero the overview's bars span:
// the widest bound of the report, rounded up to 5 points, at least 5.
func liftScale(rep *funnel.Report) float64 {
	widest := 0.0
	see := func(l funnel.Lift) {
		if l.Known {
			widest = max(widest, math.Abs(l.Low), math.Abs(l.High))
		}
	}
	seeTiming := func(t *funnel.Timing) {
		if t != nil {
			see(liftOf(t.Lift))
			see(liftOf(t.AnsweredLift))
		}
	}
	see(rep.Lift)
	seeTiming(rep.Timing)
	for _, c := range rep.Cohorts {
		see(c.Lift)
		seeTiming(c.Timing)
	}
	for _, v := range rep.Variants {
		see(v.Lift)
	}
	return max(5, math.Ceil(100*widest/5)*5)
}

// ciBar places l on a bar spanning ± scale points.
func ciBar(l funnel.Lift, scale float64) CIBar {
	if !l.Known {
		return CIBar{}
	}
	x := func(v float64) float64 {
		return math.Round(10*(ciWidth/2+(100*v/scale)*(ciWidth/2))) / 10
	}
	b := CIBar{Known: true, Zero: x(0), Lo: x(l.Low), D: x(l.Difference), Class: "open"}
	b.Width = max(1, x(l.High)-b.Lo)
	switch {
	case l.Low > 0:
		b.Class = "up"
	case l.High < 0:
		b.Class = "down"
	}
	return b
}

// LiftRow is one row of the overview's lift table.
type LiftRow struct {
	Name               string
	Open               bool
	Treatment, Holdout funnel.Arm
	Lift               funnel.Lift
	Bar                CIBar
	Kind               string // "", "variant" or "pooled"
}

func liftRow(name string, open bool, treatment, holdout funnel.Arm, l funnel.Lift, scale float64, kind string) LiftRow {
	return LiftRow{Name: name, Open: open, Treatment: treatment, Holdout: holdout, Lift: l, Bar: ciBar(l, scale), Kind: kind}
}

// liftOf is a timing difference as a Lift, to draw it as the holdout's.
func liftOf(l funnel.TimingLift) funnel.Lift {
	return funnel.Lift{Difference: l.Difference, Low: l.Low, High: l.High, Known: l.Known, Verdict: l.Verdict}
}

// TimingRow is one cohort (or the pooled cohorts) of the overview's timing
// table: both arms, and each difference's bar.
type TimingRow struct {
	Name                 string
	Open                 bool
	Timing               funnel.Timing
	AnsweredBar, LiftBar CIBar
	Kind                 string // "" or "pooled"
}

func timingRow(name string, open bool, t *funnel.Timing, scale float64, kind string) TimingRow {
	return TimingRow{Name: name, Open: open, Timing: *t, AnsweredBar: ciBar(liftOf(t.AnsweredLift), scale),
		LiftBar: ciBar(liftOf(t.Lift), scale), Kind: kind}
}

// TimingNeed is the sample the timing comparison needs to see a
// DetectableLift in reactivation (funnel.SampleSize at the run-time arm's
// rate, with the arms' proportions), what it has and what it still needs.
type TimingNeed struct {
	Known bool
	// Basis says whose arms: the pooled cohorts', or, before any cohort
	// with timed goodbyes has closed, the newest cohort's.
	Basis                     string
	Base                      float64
	BestHour, RunTime         int64
	HaveBestHour, HaveRunTime int64
	MoreBestHour, MoreRunTime int64
}

// timingNeed reads rep's timing sample: the pooled arms', else the newest
// still-counting cohort's.
func timingNeed(rep *funnel.Report) TimingNeed {
	t, basis := rep.Timing, "The pooled arms"
	if t == nil || !t.Lift.Known {
		t = nil
		for _, c := range slices.Backward(rep.Cohorts) {
			if c.Timing != nil && c.Timing.Lift.Known {
				t, basis = c.Timing, "The week of "+c.WeekStart.Format(time.DateOnly)+" (still counting)"
				break
			}
		}
	}
	if t == nil {
		return TimingNeed{}
	}
	return TimingNeed{Known: true, Basis: basis, Base: t.RunTime.Rate,
		BestHour: t.Lift.NeededBestHour, RunTime: t.Lift.NeededRunTime,
		HaveBestHour: t.BestHour.Users, HaveRunTime: t.RunTime.Users,
		MoreBestHour: max(0, t.Lift.NeededBestHour-t.BestHour.Users), MoreRunTime: max(0, t.Lift.NeededRunTime-t.RunTime.Users)}
}

// liftFuncs are the overview's template functions for the lift's table
// and the timing's (its row of the table pages).
var liftFuncs = template.FuncMap{
	"liftRow": liftRow, "liftScale": liftScale, "ciBar": ciBar,
	"timingRow": timingRow, "timingNeed": timingNeed, "timingBar": func(l funnel.TimingLift, scale float64) CIBar { return ciBar(liftOf(l), scale) },
	"points": func(f float64) string { return signedPoints(100 * f) },
}

// signedPoints is a difference in percentage points with its sign: "+2.4".
func signedPoints(p float64) string {
	if math.Abs(p) < 0.05 {
		return "0.0"
	}
	return fmt.Sprintf("%+.1f", p)
}
