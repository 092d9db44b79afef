package console

import (
	"context"
	"time"

	sm "github.com/engagement-scheduler/engagement/statemachine"

	"github.com/engagement-scheduler/engagement/pricing"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/jackc/pgx/v5"
)

// Forecast is the forecast page: the daily job's dry runs for the coming
// days, over the database as it is now.
type Forecast struct {
	AsOf time.Time     `json:"as_of"`
	Days []ForecastDay `json:"days"`
	// Budgets are the send budgets, for how long the messages waiting on
	// them take to go: the dry runs do not send, the budget's line does.
	Budgets []Budget `json:"budgets"`
	// Cost is what the days' goodbyes cost on Meta's list prices: each
	// one delivered and billed at the goodbye kind's category in the
	// prices' default country (pricing.ForecastGoodbyes).
	Cost pricing.Forecast `json:"cost"`
}

// ForecastDay is one coming day's daily run, as of its scheduled time.
type ForecastDay struct {
	AsOf time.Time `json:"as_of"`
	// Goodbyes, Timeouts and Reminders are what that day's run would do
	// if every run before it ran: the users whose deadline falls after the
	// day before's run and by this one (the first day: every user due by
	// then, overdue ones included). Timeouts include goodbyes that could
	// not be delivered (back to active), and the timeouts of the goodbyes
	// the forecast's own days send (ForecastGoodbyeTimeouts of them).
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
	// GoodbyesUSD is what the day's goodbyes cost, as Forecast.Cost says;
	// nil when the prices have none for them.
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
	err := src.dryRun(ctx, func(tx pgx.Tx, asOf time.Time) error {
		out.AsOf = asOf
		var prev ForecastDay
		for day := 1; day <= ForecastDays; day++ {
			at := asOf.Add(time.Duration(day) * 24 * time.Hour)
			steps, err := scheduler.ForecastDaily(ctx, tx, at)
			if err != nil {
				return err
			}
			d := ForecastDay{AsOf: at, Steps: steps}
			for _, st := range steps {
				n := int64(st.Succeeded)
				switch sm.Trigger(st.Name) {
				case sm.Inactivity14d:
					d.Goodbyes = n
				case sm.GoodbyeTimeout:
					d.Timeouts = n
				case sm.ReminderDue:
					d.Reminders = n
				}
			}
			cum := d
			d.Goodbyes, d.Timeouts, d.Reminders = d.Goodbyes-prev.Goodbyes, d.Timeouts-prev.Timeouts, d.Reminders-prev.Reminders
			prev = cum
			d.GoodbyesUSD = pricing.ForecastGoodbyes(d.Goodbyes, s.cfg.Prices).USD
			if sent := day - ForecastGoodbyeTimeoutDays; sent >= 1 {
				d.ForecastGoodbyeTimeouts = out.Days[sent-1].Goodbyes
				d.Timeouts += d.ForecastGoodbyeTimeouts
			}
			out.Days = append(out.Days, d)
		}
		var goodbyes int64
		for _, d := range out.Days {
			goodbyes += d.Goodbyes
		}
		out.Cost = pricing.ForecastGoodbyes(goodbyes, s.cfg.Prices)
		var err error
		out.Budgets, err = budgets(ctx, tx)
		return err
	})
	return out, err
}
