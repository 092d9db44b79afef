// Package funnel compares the goodbye's arms (engagementctl funnel, the
// console's overview): per weekly cohort of goodbyes and pooled over the
// cohorts of a window, how many users of each arm (treatment: sent a
// goodbye; holdout: held out by engagement-daily --holdout-percent) wrote
// again within 30 days, and the difference with its 95 % confidence
// interval (Newcombe's hybrid score interval) and a plain verdict; and,
// among the treated, the goodbye's timing arms (best hour: sent at the hour
// the user usually writes; run time), compared the same way.
package funnel

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Defaults of Options.
const (
	// DefaultWeeks is how many ISO weeks of cohorts Read reports.
	DefaultWeeks = 12
	// Window is how long after a goodbye a user who writes again counts as
	// reactivated.
	Window = 30 * 24 * time.Hour
)

// notClosedYet is the pooled verdict while every cohort with both arms is
// still counting: the arms exist, their window has not closed.
const notClosedYet = "not enough users yet to tell: no week with both arms has closed its 30 days yet (still counting)"

// Options choose the cohorts.
type Options struct {
	// AsOf is the instant treated as now (the database clock when zero).
	AsOf time.Time
	// Weeks is how many ISO weeks (UTC) of cohorts, up to AsOf's
	// (DefaultWeeks when 0): the window the totals pool.
	Weeks int
}

// Report is the arms by cohort and pooled: the JSON of engagementctl
// funnel --output json (../shared/CONTRACT.md, round six).
type Report struct {
	AsOf       time.Time `json:"as_of"`
	Weeks      int       `json:"weeks"`
	WindowDays int       `json:"window_days"`
	Method     string    `json:"method"`
	Cohorts    []Cohort  `json:"cohorts"`
	// The totals pool the cohorts whose window has closed and that held
	// someone out (PooledCohorts of them): a cohort without a holdout arm
	// (before the holdout began) would weigh on the treatment alone.
	PooledCohorts int  `json:"pooled_cohorts"`
	Treatment     Arm  `json:"treatment"`
	Holdout       Arm  `json:"holdout"`
	Lift          Lift `json:"lift"`
	// Variants is the treated arm of the pooled cohorts by copy variant.
	Variants []Variant `json:"variants"`
	// StillCounting is the goodbyes of the cohorts younger than the
	// window, not in the totals.
	StillCounting int64 `json:"still_counting"`
	// Timing is the timing arms (engagement-daily --best-hour-percent)
	// pooled over the closed cohorts that have them; nil when no goodbye
	// of the window recorded a timing.
	Timing *Timing `json:"timing,omitempty"`
}

// Variant is the treated users of one copy variant (Name "" for the
// kind's one text: goodbyes queued without variants), and their lift over
// the same held-out arm.
type Variant struct {
	Name string `json:"name"`
	Arm
	Lift Lift `json:"lift"`
}

// Cohort is the goodbyes logged in one ISO week (UTC), by arm.
type Cohort struct {
	WeekStart time.Time `json:"week_start"`
	// StillCounting is true while some of the week's goodbyes are younger
	// than Window: their users may still come back, and the rates grow.
	StillCounting bool `json:"still_counting"`
	Treatment     Arm  `json:"treatment"`
	Holdout       Arm  `json:"holdout"`
	Lift          Lift `json:"lift"`
	// Variants breaks the treated arm down by copy variant, in name order.
	Variants []Variant `json:"variants"`
	// Timing compares the treated users' timing arms; nil when none of
	// the week's goodbyes recorded a timing.
	Timing *Timing `json:"timing,omitempty"`
}

// Read reads the arms from db: a pool, or a transaction (a REPEATABLE READ
// one for a consistent report). Cohorts are the weeks with goodbyes,
// oldest first.
func Read(ctx context.Context, db postgres.Querier, o Options) (*Report, error) {
	weeks := cmp.Or(o.Weeks, DefaultWeeks)
	if weeks < 1 {
		return nil, fmt.Errorf("weeks must be at least 1, got %d", weeks)
	}
	asOf, err := postgres.AsOf(ctx, db, o.AsOf)
	if err != nil {
		return nil, err
	}
	rep := &Report{AsOf: asOf, Weeks: weeks, WindowDays: int(Window / (24 * time.Hour)), Method: Method, Cohorts: []Cohort{}}
	err = funnelArmsQuery.Each(ctx, db, armsArgs(asOf, weeks), func(r *funnelArmsRow) error {
		week := r.WeekStart.UTC()
		if n := len(rep.Cohorts); n == 0 || !rep.Cohorts[n-1].WeekStart.Equal(week) {
			rep.Cohorts = append(rep.Cohorts, Cohort{WeekStart: week, StillCounting: week.Add(7*24*time.Hour + Window).After(asOf),
				Variants: []Variant{}})
		}
		c := &rep.Cohorts[len(rep.Cohorts)-1]
		a := newArm(r.Users, r.Reactivated)
		if r.Holdout {
			c.Holdout = c.Holdout.add(a)
		} else {
			c.Treatment = c.Treatment.add(a)
			c.Variants = addVariant(c.Variants, Variant{Name: r.Variant, Arm: a})
		}
		if r.Timing != nil {
			return c.addTiming(*r.Timing, newTimingArm(r.Users, r.Answered48h, r.Reactivated))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the goodbye's arms: %w", err)
	}
	rep.pool()
	compareTimings(rep)
	return rep, nil
}

// pool gives each cohort and variant its lift, and pools the closed
// cohorts with a held-out arm into the report's own arms and lift; the
// cohorts still counting are counted apart.
func (rep *Report) pool() {
	rep.Variants = []Variant{}
	for i := range rep.Cohorts {
		c := &rep.Cohorts[i]
		c.Lift = lift(c.Treatment, c.Holdout)
		for j := range c.Variants {
			c.Variants[j].Lift = lift(c.Variants[j].Arm, c.Holdout)
		}
		switch {
		case c.StillCounting:
			rep.StillCounting += c.Treatment.Users + c.Holdout.Users
			c.Lift.Verdict = "still counting: " + c.Lift.Verdict
		case c.Holdout.Users > 0:
			rep.PooledCohorts++
			rep.Treatment, rep.Holdout = rep.Treatment.add(c.Treatment), rep.Holdout.add(c.Holdout)
			for _, v := range c.Variants {
				rep.Variants = addVariant(rep.Variants, Variant{Name: v.Name, Arm: v.Arm})
			}
		}
	}
	rep.Lift = lift(rep.Treatment, rep.Holdout)
	if rep.PooledCohorts == 0 && slices.ContainsFunc(rep.Cohorts, func(c Cohort) bool { return c.Holdout.Users > 0 }) {
		rep.Lift.Verdict = notClosedYet
	}
	for j := range rep.Variants {
		rep.Variants[j].Lift = lift(rep.Variants[j].Arm, rep.Holdout)
	}
}

// armsArgs are the arms' statement's arguments for weeks up to asOf.
func armsArgs(asOf time.Time, weeks int) funnelArmsArgs {
	return funnelArmsArgs{
		AsOf:            asOf,
		Weeks:           weeks,
		Window:          Window,
		GoodbyeTrigger:  string(sm.Inactivity14d),
		ComebackTrigger: string(sm.UserMessage),
		GoodbyeKind:     string(sm.GoodbyeMessage),
		GoodbyeState:    string(sm.GoodbyeSent),
		AnswerTriggers:  []string{string(sm.GoodbyeAnswerHelp), string(sm.GoodbyeAnswerRemindLater), string(sm.GoodbyeAnswerDormant)},
		AnswerWindow:    AnswerWindow,
	}
}

// addVariant adds v's arm to the variant of its name in vs (kept in name
// order), or adds it.
func addVariant(vs []Variant, v Variant) []Variant {
	i, found := slices.BinarySearchFunc(vs, v.Name, func(x Variant, name string) int { return strings.Compare(x.Name, name) })
	if found {
		vs[i].Arm = vs[i].add(v.Arm)
		return vs
	}
	return slices.Insert(vs, i, v)
}
