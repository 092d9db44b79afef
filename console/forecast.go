package console

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/pricing"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/status"
)

// Forecast is the forecast page: the daily job's dry runs for the coming
// days, over the database as it is now.
type Forecast struct {
	AsOf time.Time `json:"as_of"`
	// Timers are the daily job's steps, the state machine's timers, in the
	// order it runs them: each day's Moves has each one's count.
	Timers []ForecastTimer `json:"timers"`
	Days   []ForecastDay   `json:"days"`
	// Budgets are the send budgets, for how long the messages waiting on
	// them take to go: the dry runs do not send, the budget's line does.
	Budgets []Budget `json:"budgets"`
	// Cost is what the days' messages cost on Meta's list prices: each
	// timer's kind (statemachine.Kinds), each message delivered and
	// billed at its kind's category in the prices' default country
	// (pricing.ForecastMessages).
	Cost pricing.Forecast `json:"cost"`
}

// ForecastTimer is one of the daily job's timers, as the forecast shows
// it.
type ForecastTimer struct {
	Trigger string `json:"trigger"`
	// Kind is the message its moves queue ("" for none, or one queued on
	// request only, which the dry runs do not ask for).
	Kind string `json:"kind,omitempty"`
	// Label names its column: the kind's plural, or the trigger's words.
	Label string `json:"label"`
}

// ForecastDay is one coming day's daily run, as of its scheduled time.
type ForecastDay struct {
	AsOf time.Time `json:"as_of"`
	// Moves is what that day's run would do, by timer (its trigger), if
	// every run before it ran: the users whose deadline falls after the
	// day before's run and by this one (the first day: every user due by
	// then, overdue ones included). goodbye_timeout's include the timeouts
	// of the goodbyes the forecast's own days send
	// (ForecastGoodbyeTimeouts of them).
	Moves map[string]int64 `json:"moves"`
	// Goodbyes, Timeouts and Reminders are Moves of inactivity_14d,
	// goodbye_timeout and reminder_due.
	Goodbyes  int64 `json:"goodbyes"`
	Timeouts  int64 `json:"timeouts"`
	Reminders int64 `json:"reminders"`
	// ForecastGoodbyeTimeouts is how many of Timeouts are the goodbyes the
	// run ForecastGoodbyeTimeoutDays days before this one sends, none
	// answered: a goodbye's 48 hours start when it is delivered, after its
	// run (at the earliest once queue-process has claimed it; later under
	// quiet hours), so the first run 48 hours after that is three days
	// after its own, when it is delivered within a day.
	ForecastGoodbyeTimeouts int64 `json:"forecast_goodbye_timeouts"`
	// Cost is what the day's messages cost, as Forecast.Cost says.
	Cost pricing.Forecast `json:"cost"`
	// GoodbyesUSD is what the day's goodbyes cost; nil when the prices
	// have none for them.
	GoodbyesUSD *float64 `json:"goodbyes_usd"`
	// Steps are the daily job's dry-run counters as of the day, on the
	// database as it is now: cumulative, as if no run came before.
	Steps scheduler.Steps `json:"steps"`
}

// ForecastGoodbyeTimeoutDays is how many days after the run that sends a
// goodbye the forecast has it time out (see ForecastDay): delivered after
// its run and within a day, unanswered, its 48 hours end between the run
// two days after and the next.
const ForecastGoodbyeTimeoutDays = 3

func (s *server) forecast(ctx context.Context, src source) (Forecast, error) {
	var out Forecast
	m := s.cfg.Machine
	err := src.dryRun(ctx, func(tx pgx.Tx, asOf time.Time) error {
		out.AsOf = asOf
		prev := map[sm.Trigger]int64{}
		total := map[sm.Trigger]int64{}
		for day := 1; day <= ForecastDays; day++ {
			at := asOf.Add(time.Duration(day) * 24 * time.Hour)
			steps, err := scheduler.ForecastDaily(ctx, tx, at, m)
			if err != nil {
				return err
			}
			if day == 1 {
				out.Timers = forecastTimers(m, steps)
			}
			moves := status.StepMoves(steps)
			d := ForecastDay{AsOf: at, Steps: steps, Moves: map[string]int64{}}
			for t, n := range moves {
				d.Moves[string(t)] = n - prev[t]
				total[t] += n - prev[t]
			}
			prev = moves
			if sent := day - ForecastGoodbyeTimeoutDays; sent >= 1 {
				d.ForecastGoodbyeTimeouts = out.Days[sent-1].Goodbyes
				d.Moves[string(sm.GoodbyeTimeout)] += d.ForecastGoodbyeTimeouts
			}
			d.Goodbyes, d.Timeouts = d.Moves[string(sm.Inactivity14d)], d.Moves[string(sm.GoodbyeTimeout)]
			d.Reminders = d.Moves[string(sm.ReminderDue)]
			d.Cost = pricing.ForecastMessages(m, status.TimerMessages(m, dayMoves(d)), s.cfg.Prices)
			d.GoodbyesUSD = pricing.ForecastGoodbyes(d.Goodbyes, s.cfg.Prices).USD
			out.Days = append(out.Days, d)
		}
		out.Cost = pricing.ForecastMessages(m, status.TimerMessages(m, total), s.cfg.Prices)
		var err error
		out.Budgets, err = budgets(ctx, tx)
		return err
	})
	return out, err
}

// dayMoves is a day's moves by trigger.
func dayMoves(d ForecastDay) map[sm.Trigger]int64 {
	out := map[sm.Trigger]int64{}
	for t, n := range d.Moves {
		out[sm.Trigger(t)] = n
	}
	return out
}

// forecastTimers are the daily job's steps as the forecast shows them,
// each with the kind it queues in machine (Machine.KindFiredBy).
func forecastTimers(machine sm.Machine, steps scheduler.Steps) []ForecastTimer {
	out := make([]ForecastTimer, 0, len(steps))
	for _, st := range steps {
		t := ForecastTimer{Trigger: st.Name, Label: strings.ReplaceAll(st.Name, "_", " ")}
		if k, ok := machine.KindFiredBy(sm.Trigger(st.Name)); ok && !k.OnRequest {
			t.Kind, t.Label = string(k.Message), cmp.Or(k.Plural, string(k.Message))
		}
		out = append(out, t)
	}
	return out
}
