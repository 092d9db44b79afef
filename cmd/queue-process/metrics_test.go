package main_test

import (
	"encoding/json"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pushtest"
)

func TestPushesTheDeliveryMetricsToThePushgateway(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	t.Logf("real prometheus-pushgateway: %v", gw.Real)
	pool, url := pgtest.NewPool(t)
	queueMessages(t, pool, 7)

	res := cmdtest.Exec(t, queuecmd.NewCommand, cmdtest.Env("DATABASE_URL="+url), "--transport", "log", "--send-interval", "0",
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

// Issue 24, point 3: the dedupe store's checks had no metric. With
// --dedupe-store, a run pushes how many operations the store did, how many
// failed and their time; the alert EngagementDedupeCheckFailures reads the
// first two.
func TestPushesTheDedupeStoresChecks(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	pool, url := pgtest.NewPool(t)
	queueMessages(t, pool, 5)

	res := cmdtest.Exec(t, queuecmd.NewCommand, cmdtest.Env("DATABASE_URL="+url), "--transport", "log", "--send-interval", "0",
		"--dedupe-store", "postgres", "--output", "json", "--pushgateway-url", gw.URL)
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	var sum struct {
		Sent               int
		DedupeChecks       int     `json:"dedupe_checks"`
		DedupeCheckErrors  int     `json:"dedupe_check_errors"`
		DedupeCheckSeconds float64 `json:"dedupe_check_seconds"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil || sum.Sent != 5 || sum.DedupeChecks != 10 || sum.DedupeCheckErrors != 0 || sum.DedupeCheckSeconds <= 0 {
		t.Fatalf("summary %+v (%v), want 5 sent and 10 dedupe checks (a lookup and a record each), none failed", sum, err)
	}
	got := gw.Metrics(t, "engagement_")
	labels := []string{"job", "queue-process", "transport", "log"}
	for name, want := range map[string]float64{metrics.DedupeChecks: 10, metrics.DedupeCheckErrors: 0, metrics.DeliveryDeduplicated: 0} {
		if v, ok := got.Value(name, labels...); !ok || v != want {
			t.Errorf("%s = %v (found %v), want %v; the gateway has:\n%s", name, v, ok, want, got)
		}
	}
	if v, ok := got.Value(metrics.DedupeCheckSeconds, labels...); !ok || v <= 0 {
		t.Errorf("%s = %v (found %v), want their time", metrics.DedupeCheckSeconds, v, ok)
	}
}
