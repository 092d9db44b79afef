package main_test

import (
	"encoding/json"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pushtest"
	"github.com/engagement-scheduler/engagement/metrics"
)

func TestPushesTheDeliveryMetricsToThePushgateway(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	t.Logf("real prometheus-pushgateway: %v", gw.Real)
	pool, url := pgtest.NewPool(t)
	queueMessages(t, pool, 7)

	res := cmdtest.Exec(t, cli.NewQueueCommand, cmdtest.Env("DATABASE_URL="+url), "--transport", "log", "--send-interval", "0",
		"--output", "json", "--pushgateway-url", gw.URL)
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	var sum struct{ Sent, Retried, Failed, Recovered int }
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil || sum.Sent != 7 {
		t.Fatalf("summary %+v (%v), want 7 sent", sum, err)
	}

	got := gw.Metrics(t, "engagement_")
	for result, n := range map[string]int{"sent": sum.Sent, "retried": sum.Retried, "failed": sum.Failed} {
		v, ok := got.Value(metrics.DeliveryMessages, "job", "queue-process", "transport", "log", "result", result)
		if !ok || v != float64(n) {
			t.Errorf("%s{result=%q} = %v (found %v), want %d; the gateway has:\n%s", metrics.DeliveryMessages, result, v, ok, n, got)
		}
	}
	if v, ok := got.Value(metrics.DeliveryRecovered, "job", "queue-process", "transport", "log"); !ok || v != float64(sum.Recovered) {
		t.Errorf("%s = %v (found %v), want %d", metrics.DeliveryRecovered, v, ok, sum.Recovered)
	}
	if v, ok := got.Value(metrics.JobLastRunFailed, "job", "queue-process"); !ok || v != 0 {
		t.Errorf("%s = %v (found %v), want 0", metrics.JobLastRunFailed, v, ok)
	}
	if _, ok := got.Value(metrics.JobLastSuccess, "job", "queue-process"); !ok {
		t.Errorf("no %s for queue-process:\n%s", metrics.JobLastSuccess, got)
	}
	if f := got.Find(metrics.JobUsers); len(f) != 0 {
		t.Errorf("queue-process pushed per-user job metrics: %s", f)
	}
}
