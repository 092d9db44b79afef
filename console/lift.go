package console

import (
	"fmt"
	"html/template"
	"math"

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
	see(rep.Lift)
	for _, c := range rep.Cohorts {
		see(c.Lift)
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

// liftFuncs are the overview's template functions for the lift's table
// (its row of the table pages).
var liftFuncs = template.FuncMap{
	"liftRow": liftRow, "liftScale": liftScale, "ciBar": ciBar,
	"points": func(f float64) string { return signedPoints(100 * f) },
}

// signedPoints is a difference in percentage points with its sign: "+2.4".
func signedPoints(p float64) string {
	if math.Abs(p) < 0.05 {
		return "0.0"
	}
	return fmt.Sprintf("%+.1f", p)
}
