package delivery

import (
	"time"

	"github.com/engagement-scheduler/engagement"
)

// Spreading a day's budget (queue-process --spread-budget): without it, a
// budget of 300 at the default pace is spent in two and a half minutes by
// the first run that finds room, a burst a ban detector sees. With it, the
// least gap between two sends on the transport becomes the waking hours
// (the day less the quiet hours) over the budget's limit today, less half
// the jitter, so that on average the day's budget lasts the waking hours:
// 300 over 09:00-21:00 is one send every 2 min 24 s. It is never below
// --send-interval. The gap is the shared pace's (pace.sql), so it holds
// across processes and across runs: a run every five minutes sends the two
// the pace lets through.

// Pace is engagement.Pace: the root package holds the types
// the application packages share.
type Pace = engagement.Pace

// wakingHours is the day less the quiet hours q.
func wakingHours(q QuietHours) time.Duration {
	if !q.Set() {
		return 24 * time.Hour
	}
	quiet := q.End - q.Start
	if q.End <= q.Start {
		quiet += 24 * time.Hour
	}
	return 24*time.Hour - quiet
}

// PlanPace works out the pace: interval, jitter, the quiet hours and,
// under a budget, today's limit; spread stretches the interval so that the
// limit lasts the waking hours.
func PlanPace(interval, jitter time.Duration, quiet QuietHours, limit int, spread bool) Pace {
	p := Pace{Interval: interval, Jitter: jitter, Spread: spread, Waking: wakingHours(quiet), Limit: limit, Fits: true}
	if limit <= 0 || interval <= 0 {
		return p
	}
	if spread {
		p.Interval = max(interval, p.Waking/time.Duration(limit)-jitter/2)
	}
	p.Needs = time.Duration(limit) * (p.Interval + jitter/2)
	p.Fits = p.Needs <= p.Waking
	return p
}

// pace sets the run's pace from its budget as it opened (the ramp's limit
// today), and says it: the arithmetic, and a warning when the day's budget
// does not fit in the waking hours at this pace.
func (r *run) pace() {
	if r.pacer == nil {
		return
	}
	limit := 0
	if r.budget != nil {
		limit = r.budget.limitNow()
	}
	plan := PlanPace(r.cfg.SendInterval, r.cfg.SendJitter, r.cfg.QuietHours, limit, r.cfg.SpreadBudget)
	r.pacer.interval = plan.Interval
	r.plan = plan
	ev := r.log.Info()
	if !plan.Fits {
		ev = r.log.Warn()
	}
	ev = ev.Dur("send_interval", plan.Interval).Dur("send_jitter", plan.Jitter).Bool("spread", plan.Spread).
		Dur("waking_hours", plan.Waking)
	switch {
	case limit == 0:
		ev.Msg("pace")
	case plan.Fits:
		ev.Int("daily_limit", limit).Dur("budget_needs", plan.Needs).
			Msgf("pace: %d recipients × %s a send on average = %s, within the %s of waking hours", limit,
				plan.Interval+plan.Jitter/2, plan.Needs, plan.Waking)
	default:
		ev.Int("daily_limit", limit).Dur("budget_needs", plan.Needs).
			Msgf("pace: the day's budget does not fit in the waking hours: %d recipients × %s a send on average = %s, more than %s; at most about %d go a day",
				limit, plan.Interval+plan.Jitter/2, plan.Needs, plan.Waking, int(plan.Waking/(plan.Interval+plan.Jitter/2)))
	}
}
