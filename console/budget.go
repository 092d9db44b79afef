package console

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// Budget is a transport's send budget (queue-process --daily-limit) as
// the queue and forecast pages show it: delivery.ReadBudgets' report, the
// one engagementctl status prints, and how far off its times are.
type Budget struct {
	delivery.BudgetReport
	// NextSlotIn and ClearsIn say how far off NextSlotAt and ClearsAt are
	// ("in 3 h 20 min", "in 2 days"), from the database's clock.
	NextSlotIn string `json:"next_slot_in,omitempty"`
	ClearsIn   string `json:"clears_in,omitempty"`

	clearsAfter time.Duration // ClearsAt - now
}

// Free is how many new recipients the window takes before it is full.
func (b Budget) Free() int { return max(b.Limit-b.Used, 0) }

// Rate says the budget's limit today: "1000 a day", or while a ramp warms
// the number up, "250 today, day 1 of the ramp 250,2 up to 1000".
func (b Budget) Rate() string {
	if b.RampDay == nil {
		return formatInt(int64(b.Limit)) + " a day"
	}
	return fmt.Sprintf("%s today, day %d of the ramp %s up to %s",
		formatInt(int64(b.Limit)), *b.RampDay+1, b.Ramp, formatInt(int64(b.DailyLimit)))
}

// budgets reads the send budgets in the page's transaction. They are what
// queue-process sees now, on the database's clock, whatever the page's
// as-of (a window and a line have no past to look at), so how far off
// their times are is said from that clock too: now(), the transaction's
// start, the instant ReadBudgets read them at. Never nil: the JSON says
// [] rather than null when no queue-process ran with a budget.
func budgets(ctx context.Context, tx pgx.Tx) ([]Budget, error) {
	reports, err := delivery.ReadBudgets(ctx, tx)
	if err != nil {
		return nil, err
	}
	out := make([]Budget, 0, len(reports))
	if len(reports) == 0 {
		return out, nil
	}
	now, err := postgres.Now(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, r := range reports {
		b := Budget{BudgetReport: r}
		if r.NextSlotAt != nil {
			b.NextSlotIn = until(r.NextSlotAt.Sub(now))
		}
		if r.ClearsAt != nil {
			b.clearsAfter = r.ClearsAt.Sub(now)
			b.ClearsIn = until(b.clearsAfter)
		}
		out = append(out, b)
	}
	return out, nil
}

// until says how far off an instant d from now is: in minutes under a
// day, else in whole days rounded up (as engagementctl status says it):
// a line that clears in 30 hours takes a second day.
func until(d time.Duration) string {
	switch {
	case d <= 0:
		return "due now"
	case d < time.Minute:
		return "in under a minute"
	case d < time.Hour:
		return fmt.Sprintf("in %d min", int(d.Round(time.Minute).Minutes()))
	case d < 24*time.Hour:
		m := int(d.Round(time.Minute).Minutes())
		return fmt.Sprintf("in %d h %d min", m/60, m%60)
	}
	n := int(math.Ceil(d.Hours() / 24))
	return fmt.Sprintf("in %d days", n)
}
