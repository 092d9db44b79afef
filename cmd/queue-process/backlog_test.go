package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pushtest"
)

// queue-process pushes the backlog it leaves, for the backlog and
// oldest-due alerts (deploy/prometheus/alerts.yml). Three due messages
// stay pending because the run may not claim anything (its --max-duration
// has passed before it starts); two are not due yet.
func TestPushesTheQueueBacklogItLeaves(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	pool, url := pgtest.NewPool(t)
	queueMessages(t, pool, 5)
	now := fixture.Now(t, pool)
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{}) {
		due := now.Add(-10 * time.Minute)
		if strings.HasSuffix(m.Key(), "-1") || strings.HasSuffix(m.Key(), "-2") {
			due = now.Add(24 * time.Hour)
		}
		fixture.SetMessages(t, pool, fixture.MessageChange{ID: m.ID, ScheduledFor: due})
	}

	res := cmdtest.Exec(t, queuecmd.NewCommand, cmdtest.Env("DATABASE_URL="+url), "--transport", "log", "--send-interval", "0",
		"--max-duration", "1ns", "--output", "json", "--pushgateway-url", gw.URL)
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	got := gw.Metrics(t, "engagement_queue_")
	for name, want := range map[string]float64{metrics.QueuePending: 5, metrics.QueueDue: 3} {
		if v, ok := got.Value(name, "job", "queue-process"); !ok || v != want {
			t.Errorf("%s = %v (found %v), want %v; the gateway has:\n%s", name, v, ok, want, got)
		}
	}
	age, ok := got.Value(metrics.QueueOldestDueAge, "job", "queue-process")
	if !ok || age < (10*time.Minute).Seconds() || age > (15*time.Minute).Seconds() {
		t.Errorf("%s = %v (found %v), want the 10 minutes the oldest due message waited", metrics.QueueOldestDueAge, age, ok)
	}
}
