package funnel

import (
	"fmt"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Timing arms (migration 84's engagement_state_transitions.timing).
const (
	// BestHour is the arm engagement-daily --best-hour-percent schedules at
	// the hour its user usually writes.
	BestHour = "best_hour"
	// RunTime is the arm that keeps the run's time.
	RunTime = "run_time"
)

// AnswerWindow is how long after its send a goodbye's answer counts in
// TimingArm.Answered48h: the goodbye's own 48 hours.
const AnswerWindow = sm.GoodbyeWindow

// Timing compares the goodbye's timing arms (engagement-daily
// --best-hour-percent): the treated users whose goodbye went at the hour
// they usually write against those whose goodbye went at the run's time,
// each user in the arm the run assigned them (intent to treat).
type Timing struct {
	BestHour TimingArm `json:"best_hour"`
	RunTime  TimingArm `json:"run_time"`
	// Lift is the best-hour arm's reactivation rate minus the run-time
	// arm's, with its interval and verdict: the answer the comparison is
	// run for.
	Lift TimingLift `json:"lift"`
	// AnsweredLift is the same for the answers within 48 hours, the first
	// thing a goodbye at a better hour should change.
	AnsweredLift TimingLift `json:"answered_lift"`
	// PooledCohorts is, in the report's totals, how many closed cohorts
	// with timed goodbyes they pool (0 in a cohort).
	PooledCohorts int `json:"pooled_cohorts,omitempty"`
}

// TimingArm is one timing arm of a cohort, or of the pooled cohorts.
type TimingArm struct {
	Users int64 `json:"users"`
	// Answered48h is how many answered the goodbye (help, remind me later,
	// not now) within AnswerWindow of its send.
	Answered48h int64 `json:"answered_48h"`
	// Reactivated is how many wrote again within Window of the goodbye.
	Reactivated int64 `json:"reactivated"`
	// AnsweredRate and Rate are Answered48h and Reactivated over Users,
	// 0 without users.
	AnsweredRate float64 `json:"answered_rate"`
	Rate         float64 `json:"rate"`
}

func (a TimingArm) add(o TimingArm) TimingArm {
	return newTimingArm(a.Users+o.Users, a.Answered48h+o.Answered48h, a.Reactivated+o.Reactivated)
}

func newTimingArm(users, answered, reactivated int64) TimingArm {
	r, ans := newArm(users, reactivated), newArm(users, answered)
	return TimingArm{Users: users, Answered48h: answered, Reactivated: reactivated, AnsweredRate: ans.Rate, Rate: r.Rate}
}

// TimingLift is a difference between the timing arms, best hour minus run
// time, with its 95 % interval (Method) and verdict, as Lift is for the
// holdout.
type TimingLift struct {
	Difference float64 `json:"difference"`
	Low        float64 `json:"low"`
	High       float64 `json:"high"`
	// Known is false while an arm has no users.
	Known bool `json:"known"`
	// NeededBestHour and NeededRunTime are how many users each arm needs
	// to see a DetectableLift at the run-time arm's rate with the arms'
	// present proportions (SampleSize), 0 when not Known.
	NeededBestHour int64  `json:"needed_best_hour"`
	NeededRunTime  int64  `json:"needed_run_time"`
	Verdict        string `json:"verdict"`
}

// Verdicts' words for the timing arms.
var (
	timingWords = words{
		none:   "nobody in the run-time arm (engagement-daily --best-hour-percent)",
		up:     "the user's hour brings more users back than the run's time",
		down:   "the user's hour brings fewer users back than the run's time",
		same:   "the user's hour makes no clear difference",
		first:  "best-hour",
		second: "run-time",
	}
	answeredWords = words{
		none:   timingWords.none,
		up:     "more users answer the goodbye at their hour than at the run's time",
		down:   "fewer users answer the goodbye at their hour than at the run's time",
		same:   "the user's hour makes no clear difference to the answers",
		first:  "best-hour",
		second: "run-time",
	}
)

// compareTiming compares the arms' reactivation and answers.
func (t *Timing) compareTiming() {
	timingLift := func(a, b Arm, w words) TimingLift {
		l := compare(a, b, w)
		return TimingLift{Difference: l.Difference, Low: l.Low, High: l.High, Known: l.Known,
			NeededBestHour: l.NeededTreatment, NeededRunTime: l.NeededHoldout, Verdict: l.Verdict}
	}
	b, r := t.BestHour, t.RunTime
	t.Lift = timingLift(newArm(b.Users, b.Reactivated), newArm(r.Users, r.Reactivated), timingWords)
	t.AnsweredLift = timingLift(newArm(b.Users, b.Answered48h), newArm(r.Users, r.Answered48h), answeredWords)
}

// addTiming adds a treated row's users to c's timing arm.
func (c *Cohort) addTiming(timing string, a TimingArm) error {
	if c.Timing == nil {
		c.Timing = &Timing{}
	}
	switch timing {
	case BestHour:
		c.Timing.BestHour = c.Timing.BestHour.add(a)
	case RunTime:
		c.Timing.RunTime = c.Timing.RunTime.add(a)
	default:
		return fmt.Errorf("a goodbye's timing %q is neither %s nor %s", timing, BestHour, RunTime)
	}
	return nil
}

// compareTimings compares each cohort's timing arms and pools those of the
// closed cohorts into rep's: nothing when no goodbye recorded a timing.
func compareTimings(rep *Report) {
	for i := range rep.Cohorts {
		c := &rep.Cohorts[i]
		if c.Timing == nil {
			continue
		}
		if rep.Timing == nil {
			rep.Timing = &Timing{}
		}
		c.Timing.compareTiming()
		if c.StillCounting {
			c.Timing.Lift.Verdict = "still counting: " + c.Timing.Lift.Verdict
			c.Timing.AnsweredLift.Verdict = "still counting: " + c.Timing.AnsweredLift.Verdict
			continue
		}
		rep.Timing.PooledCohorts++
		rep.Timing.BestHour = rep.Timing.BestHour.add(c.Timing.BestHour)
		rep.Timing.RunTime = rep.Timing.RunTime.add(c.Timing.RunTime)
	}
	if rep.Timing != nil {
		rep.Timing.compareTiming()
		if rep.Timing.PooledCohorts == 0 {
			rep.Timing.Lift.Verdict, rep.Timing.AnsweredLift.Verdict = notClosedYet, notClosedYet
		}
	}
}
