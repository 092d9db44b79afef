package funnel

import (
	"fmt"
	"math"
	"strconv"
)

// Z95 is the standard normal quantile for a two-sided 95 % interval.
const Z95 = 1.959963984540054

// z80 is the standard normal quantile for 80 % power (one-sided).
const z80 = 0.8416212335729143

// Method names the interval Lift computes, for the JSON and the pages.
const Method = "Newcombe's hybrid score interval (Wilson score for each rate; Newcombe 1998, method 10), 95 %"

// DetectableLift is the smallest difference in reactivation the verdict
// cares about: 3 percentage points. Once both arms hold the users needed to
// see it (SampleSize, at the held-out arm's rate), an interval that still
// holds zero says the goodbye makes no such difference.
const DetectableLift = 0.03

// Arm is one arm of a cohort (or of the pooled cohorts): its users and how
// many reactivated (wrote again within 30 days of their goodbye).
type Arm struct {
	Users       int64 `json:"users"`
	Reactivated int64 `json:"reactivated"`
	// Rate is Reactivated / Users, 0 without users.
	Rate float64 `json:"rate"`
}

func newArm(users, reactivated int64) Arm {
	a := Arm{Users: users, Reactivated: reactivated}
	if users > 0 {
		a.Rate = float64(reactivated) / float64(users)
	}
	return a
}

func (a Arm) add(o Arm) Arm { return newArm(a.Users+o.Users, a.Reactivated+o.Reactivated) }

// Lift is the difference in reactivation between the arms, treatment minus
// holdout, with its 95 % confidence interval (Method), and what they say.
type Lift struct {
	// Difference is the treatment's rate minus the holdout's.
	Difference float64 `json:"difference"`
	// Low and High bound the 95 % interval of the difference.
	Low  float64 `json:"low"`
	High float64 `json:"high"`
	// Known is false when an arm has no users: no difference to speak of
	// (Difference, Low and High are 0).
	Known bool `json:"known"`
	// Needed is how many users each arm needs to see a DetectableLift at
	// the held-out arm's rate with the arms' present proportions
	// (SampleSize), 0 when not Known.
	NeededTreatment int64 `json:"needed_treatment"`
	NeededHoldout   int64 `json:"needed_holdout"`
	// Verdict is the plain sentence the console and the CLI show.
	Verdict string `json:"verdict"`
}

// Wilson is the Wilson score interval of x successes in n trials at z
// (Wilson 1927; Newcombe 1998, method 3). n must be positive.
func Wilson(x, n int64, z float64) (low, high float64) {
	p, nn := float64(x)/float64(n), float64(n)
	z2 := z * z
	centre := (p + z2/(2*nn)) / (1 + z2/nn)
	half := z / (1 + z2/nn) * math.Sqrt(p*(1-p)/nn+z2/(4*nn*nn))
	return max(0, centre-half), min(1, centre+half)
}

// Newcombe is the hybrid score interval of the difference of two
// independent proportions, x1/n1 − x2/n2, at z (Newcombe, R. G. (1998).
// Interval estimation for the difference between independent proportions:
// comparison of eleven methods. Statistics in Medicine 17, 873–890; method
// 10): from each proportion's Wilson interval (l, u),
//
//	low  = d − √((p1 − l1)² + (u2 − p2)²)
//	high = d + √((u1 − p1)² + (p2 − l2)²)
//
// Unlike the Wald interval it stays within [−1, 1] and keeps its coverage
// for small arms and rates near 0. n1 and n2 must be positive.
func Newcombe(x1, n1, x2, n2 int64, z float64) (d, low, high float64) {
	p1, p2 := float64(x1)/float64(n1), float64(x2)/float64(n2)
	l1, u1 := Wilson(x1, n1, z)
	l2, u2 := Wilson(x2, n2, z)
	d = p1 - p2
	low = d - math.Sqrt((p1-l1)*(p1-l1)+(u2-p2)*(u2-p2))
	high = d + math.Sqrt((u1-p1)*(u1-p1)+(p2-l2)*(p2-l2))
	return d, low, high
}

// SampleSize is how many users the held-out arm needs (and the treated arm,
// ratio times as many) for a two-sided test at 5 % to see a difference of
// lift over a base rate (the held-out arm's) with 80 % power: the normal
// approximation without continuity correction for unequal arms (Fleiss,
// Levin & Paik, Statistical Methods for Rates and Proportions, 3rd ed.,
// 2003, chapter 4, unequal sample sizes):
//
//	n_holdout = (z₀.₉₇₅ √(p̄ q̄ (1 + 1/k)) + z₀.₈ √(p₁q₁/k + p₀q₀))² / lift²
//
// with p₀ the base rate, p₁ = p₀ + lift, k = ratio (treated per held-out
// user) and p̄ = (k p₁ + p₀)/(k + 1). docs/holdout.md has the table.
func SampleSize(base, lift, ratio float64) (treatment, holdout int64) {
	p0, p1 := base, min(base+lift, 1)
	pbar := (ratio*p1 + p0) / (ratio + 1)
	a := Z95 * math.Sqrt(pbar*(1-pbar)*(1+1/ratio))
	b := z80 * math.Sqrt(p1*(1-p1)/ratio+p0*(1-p0))
	n := math.Ceil((a + b) * (a + b) / (lift * lift))
	return int64(math.Ceil(n * ratio)), int64(n)
}

// lift compares the goodbye's arms (see Lift).
func lift(treatment, holdout Arm) Lift {
	return compare(treatment, holdout, holdoutWords)
}

// words are what a comparison's verdict calls its arms and its finding.
type words struct {
	// none is said when the second arm has no users.
	none string
	// up, down and same are the findings: the first arm's rate is above
	// the second's, below it, or within DetectableLift of it with both
	// arms at their minimal sample.
	up, down, same string
	// first and second name the arms' users in "… users needed".
	first, second string
}

// holdoutWords are the verdict's words for treatment against holdout.
var holdoutWords = words{
	none:   "nobody held out (engagement-daily --holdout-percent)",
	up:     "the goodbye brings users back",
	down:   "the goodbye brings fewer users back than silence",
	same:   "the goodbye makes no clear difference",
	first:  "treated",
	second: "held-out",
}

// compare is the difference of a's rate over b's, its interval (Newcombe),
// the users each arm needs to see a DetectableLift at b's rate
// (SampleSize, as NeededTreatment for a and NeededHoldout for b), and the
// verdict in w's words.
func compare(a, b Arm, w words) Lift {
	if a.Users == 0 || b.Users == 0 {
		v := "not enough users yet to tell"
		if b.Users == 0 {
			v += ": " + w.none
		}
		return Lift{Verdict: v}
	}
	d, lo, hi := Newcombe(a.Reactivated, a.Users, b.Reactivated, b.Users, Z95)
	l := Lift{Difference: d, Low: lo, High: hi, Known: true}
	l.NeededTreatment, l.NeededHoldout = SampleSize(b.Rate, DetectableLift, float64(a.Users)/float64(b.Users))
	ci := fmt.Sprintf("%+.1f points (95 %% CI %+.1f to %+.1f)", 100*d, 100*lo, 100*hi)
	switch {
	case lo > 0:
		l.Verdict = w.up + ": " + ci
	case hi < 0:
		l.Verdict = w.down + ": " + ci
	case a.Users >= l.NeededTreatment && b.Users >= l.NeededHoldout:
		l.Verdict = fmt.Sprintf("no lift of %.0f points or more: %s, %s", 100*DetectableLift, w.same, ci)
	default:
		l.Verdict = fmt.Sprintf("not enough users yet to tell: %s; about %s %s and %s %s users needed",
			ci, thousands(l.NeededTreatment), w.first, thousands(l.NeededHoldout), w.second)
	}
	return l
}

// thousands writes n with a comma between thousands: 13,299.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
