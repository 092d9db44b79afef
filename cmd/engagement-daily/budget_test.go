package main_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 42's follow-up: the jobs' queue step reads the send budget's window
// as of the run's --as-of, as queue-process --as-of does. queue-process
// fills a budget of 10 now; 5 more messages to other recipients are due;
// the daily job run --as-of a day and a minute on, with the same budget,
// finds the window turned and sends them (on 7559505 its queue step read
// the window by the database clock, found it full and put them in line).
func TestQueueStepReadsTheBudgetAsOfTheRun(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_DAILY_LIMIT=10")
	fixture.DueToRecipients(t, pool, 10, "budget-")
	first := cmdtest.Exec(t, queuecmd.NewCommand, env, "--transport", "log", "--send-interval", "0", "--output", "json")
	var sum delivery.ProcessSummary
	if err := json.Unmarshal([]byte(first.Stdout), &sum); first.Code != 0 || err != nil || sum.Sent != 10 ||
		sum.Budget == nil || sum.Budget.Used != 10 {
		t.Fatalf("queue-process: exit %d, %v, summary %+v, want 10 sent and the budget full: %s", first.Code, err, sum, first.Stderr)
	}
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	for i := 1; i <= 5; i++ {
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
			Params: `{"count":"2"}`, JID: fmt.Sprintf("55118%08d@s.whatsapp.net", i), ScheduledFor: fixture.Now(t, pool).Add(-time.Minute),
			Key: fmt.Sprintf("later-%d", i)})
	}

	asOf := fixture.Now(t, pool).Add(delivery.BudgetWindow + time.Minute).UTC().Format(time.RFC3339)
	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, env, "--as-of", asOf, "--allow-future-as-of", "--output", "json",
		"--transport", "log", "--send-interval", "0")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	var job struct {
		Delivery *delivery.ProcessSummary `json:"delivery"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &job); err != nil || job.Delivery == nil {
		t.Fatalf("summary %q: %v", res.Stdout, err)
	}
	if d := job.Delivery; d.Sent != 5 || d.Deferred != 0 || d.Budget == nil || d.Budget.Used != 5 {
		t.Errorf("the queue step as of a day on sent %d and deferred %d, budget %+v; want the 5 sent in the turned window, 5 of 10 used",
			d.Sent, d.Deferred, d.Budget)
	}
}
