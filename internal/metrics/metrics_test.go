package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/internal/testkit/pushtest"
	"github.com/engagement-scheduler/engagement/scheduler"
)

var (
	monday  = time.Date(2026, 11, 23, 6, 0, 5, 0, time.UTC)
	tuesday = monday.Add(24 * time.Hour)
)

func dailyRun(end time.Time) metrics.Run {
	return metrics.Run{
		Job:      scheduler.DailyJob,
		Duration: 1500 * time.Millisecond,
		End:      end,
		Summary: &scheduler.Summary{Job: scheduler.DailyJob, Steps: scheduler.Steps{
			{Name: "inactivity_14d", Counts: scheduler.Counts{Processed: 5, Succeeded: 4, Failed: 1, Skipped: 2, Queued: 4, Duplicates: 1}},
			{Name: "goodbye_timeout", Counts: scheduler.Counts{Processed: 3, Succeeded: 3}},
			{Name: "reminder_due"},
		}},
		Delivery: &delivery.ProcessSummary{Transport: "log", Processed: 5, Sent: 3, Retried: 1, Failed: 1, Recovered: 2,
			Invalid: 1, Cancelled: 3, CancelReasons: map[string]int{"stale": 2, "opted_out": 1}, Deferred: 4,
			DeferReasons: map[string]int{"quiet_hours": 1, "budget": 3},
			Budget:       &delivery.BudgetState{Limit: 300, Used: 300, Waiting: 7}},
	}
}

func newPusher(t *testing.T, url string) *metrics.Pusher {
	t.Helper()
	p, err := metrics.NewPusher(url)
	if err != nil {
		t.Fatalf("NewPusher(%s): %v", url, err)
	}
	return p
}

func want(t *testing.T, got pushtest.Samples, value float64, name string, labels ...string) {
	t.Helper()
	v, ok := got.Value(name, labels...)
	if !ok {
		t.Errorf("no single sample %s%v; the gateway has:\n%s", name, labels, got)
		return
	}
	if v != value {
		t.Errorf("%s%v = %v, want %v", name, labels, v, value)
	}
}

func TestCompletedRunPushesEveryMetric(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	if err := newPusher(t, gw.URL).Push(context.Background(), dailyRun(monday)); err != nil {
		t.Fatal(err)
	}
	got := gw.Metrics(t, "engagement_")
	job := []string{"job", "engagement-daily"}
	with := func(kv ...string) []string { return append(append([]string{}, job...), kv...) }

	want(t, got, 1.5, metrics.JobDuration, job...)
	want(t, got, float64(monday.Unix())+0, metrics.JobLastSuccess, job...)
	want(t, got, 0, metrics.JobLastRunFailed, job...)
	if f := got.Find(metrics.JobLastFailure); len(f) != 0 {
		t.Errorf("a completed run pushed %s: %s", metrics.JobLastFailure, f)
	}
	for _, c := range []struct {
		step                                                string
		processed, succeeded, failed, skipped, queued, dups float64
	}{
		{"inactivity_14d", 5, 4, 1, 2, 4, 1},
		{"goodbye_timeout", 3, 3, 0, 0, 0, 0},
		{"reminder_due", 0, 0, 0, 0, 0, 0},
	} {
		want(t, got, c.processed, metrics.JobUsersProcessed, with("step", c.step)...)
		want(t, got, c.succeeded, metrics.JobUsers, with("step", c.step, "outcome", "succeeded")...)
		want(t, got, c.failed, metrics.JobUsers, with("step", c.step, "outcome", "failed")...)
		want(t, got, c.skipped, metrics.JobUsers, with("step", c.step, "outcome", "skipped")...)
		want(t, got, c.queued, metrics.JobMessages, with("step", c.step, "result", "queued")...)
		want(t, got, c.dups, metrics.JobMessages, with("step", c.step, "result", "duplicates")...)
	}
	want(t, got, 3, metrics.DeliveryMessages, with("transport", "log", "result", "sent")...)
	want(t, got, 1, metrics.DeliveryMessages, with("transport", "log", "result", "retried")...)
	want(t, got, 1, metrics.DeliveryMessages, with("transport", "log", "result", "failed")...)
	want(t, got, 2, metrics.DeliveryRecovered, with("transport", "log")...)
	want(t, got, 2, metrics.DeliveryCancelled, with("transport", "log", "reason", "stale")...)
	want(t, got, 1, metrics.DeliveryCancelled, with("transport", "log", "reason", "opted_out")...)
	want(t, got, 0, metrics.DeliveryCancelled, with("transport", "log", "reason", "no_user")...)
	want(t, got, 4, metrics.DeliveryDeferred, with("transport", "log")...)
	want(t, got, 3, metrics.BudgetDeferred, with("transport", "log")...)
	want(t, got, 300, metrics.BudgetLimit, with("transport", "log")...)
	want(t, got, 300, metrics.BudgetUsed, with("transport", "log")...)
	want(t, got, 7, metrics.BudgetWaiting, with("transport", "log")...)
	want(t, got, 1, metrics.DeliveryInvalid, with("transport", "log")...)
	for _, s := range got {
		if s.Labels["shard"] != "" {
			t.Errorf("an unsharded run pushed a shard label: %s", s)
		}
	}
	t.Logf("real pushgateway: %v", gw.Real)
}

// A failed run must not erase the last success: the alert on its age is
// the point of pushing at all.
func TestFailedRunKeepsTheLastSuccess(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	p := newPusher(t, gw.URL)
	ctx := context.Background()
	job := []string{"job", "engagement-daily"}
	if err := p.Push(ctx, dailyRun(monday)); err != nil {
		t.Fatal(err)
	}

	failed := metrics.Run{Job: scheduler.DailyJob, Duration: 250 * time.Millisecond, End: tuesday, Failed: true}
	if err := p.Push(ctx, failed); err != nil {
		t.Fatal(err)
	}
	got := gw.Metrics(t, "engagement_")
	want(t, got, float64(monday.Unix()), metrics.JobLastSuccess, job...)
	want(t, got, float64(tuesday.Unix()), metrics.JobLastFailure, job...)
	want(t, got, 1, metrics.JobLastRunFailed, job...)
	want(t, got, 0.25, metrics.JobDuration, job...)
	// The last completed run's counters stay.
	want(t, got, 4, metrics.JobMessages, "job", "engagement-daily", "step", "inactivity_14d", "result", "queued")

	// The next completed run replaces the group: no failure left behind.
	wednesday := tuesday.Add(24 * time.Hour)
	next := dailyRun(wednesday)
	next.Summary.Steps[0].Queued = 7
	next.Delivery = nil
	if err := p.Push(ctx, next); err != nil {
		t.Fatal(err)
	}
	got = gw.Metrics(t, "engagement_")
	want(t, got, float64(wednesday.Unix()), metrics.JobLastSuccess, job...)
	want(t, got, 0, metrics.JobLastRunFailed, job...)
	want(t, got, 7, metrics.JobMessages, "job", "engagement-daily", "step", "inactivity_14d", "result", "queued")
	for _, name := range []string{metrics.JobLastFailure, metrics.DeliveryMessages} {
		if f := got.Find(name); len(f) != 0 {
			t.Errorf("%s survived a completed run that has none: %s", name, f)
		}
	}
}

// A job's run told to stop (SIGTERM; issue 55) is no failure: it clears
// engagement_job_last_run_failed, so EngagementJobRunFailed does not fire
// for a platform's ordinary stop. Nor is it a success: the last success's
// timestamp and counters stay, so a job stopped day after day still trips
// the no-recent-success alerts; its stop has a timestamp of its own, gone
// once a run completes.
func TestStoppedRunIsNoFailureAndKeepsTheLastSuccess(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	p := newPusher(t, gw.URL)
	ctx := context.Background()
	job := []string{"job", "engagement-daily"}
	if err := p.Push(ctx, dailyRun(monday)); err != nil {
		t.Fatal(err)
	}
	if err := p.Push(ctx, metrics.Run{Job: scheduler.DailyJob, Duration: 250 * time.Millisecond, End: tuesday, Failed: true}); err != nil {
		t.Fatal(err)
	}
	wednesday := tuesday.Add(24 * time.Hour)
	stopped := dailyRun(wednesday)
	stopped.Stopped, stopped.Duration = true, 750*time.Millisecond
	stopped.Summary.Steps[0].Queued = 2
	if err := p.Push(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	got := gw.Metrics(t, "engagement_")
	want(t, got, 0, metrics.JobLastRunFailed, job...)
	want(t, got, float64(wednesday.Unix()), metrics.JobLastStopped, job...)
	want(t, got, float64(monday.Unix()), metrics.JobLastSuccess, job...)
	want(t, got, 0.75, metrics.JobDuration, job...)
	// The last completed run's counters stay, not the stopped run's.
	want(t, got, 4, metrics.JobMessages, "job", "engagement-daily", "step", "inactivity_14d", "result", "queued")

	thursday := wednesday.Add(24 * time.Hour)
	if err := p.Push(ctx, dailyRun(thursday)); err != nil {
		t.Fatal(err)
	}
	got = gw.Metrics(t, "engagement_")
	want(t, got, float64(thursday.Unix()), metrics.JobLastSuccess, job...)
	if f := got.Find(metrics.JobLastStopped); len(f) != 0 {
		t.Errorf("%s survived a completed run: %s", metrics.JobLastStopped, f)
	}
}

func TestShardsPushToGroupsOfTheirOwn(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	p := newPusher(t, gw.URL)
	for i, shard := range []string{"1/3", "2/3"} {
		r := dailyRun(monday)
		r.Shard = shard
		r.Summary.Steps[0].Queued = 10 + i
		if err := p.Push(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	// Shard 2 failing leaves shard 1 alone.
	if err := p.Push(context.Background(), metrics.Run{Job: scheduler.DailyJob, Shard: "2/3", End: tuesday, Failed: true}); err != nil {
		t.Fatal(err)
	}
	got := gw.Metrics(t, "engagement_")
	q := func(shard string) []string {
		return []string{"job", "engagement-daily", "shard", shard, "step", "inactivity_14d", "result", "queued"}
	}
	want(t, got, 10, metrics.JobMessages, q("1/3")...)
	want(t, got, 11, metrics.JobMessages, q("2/3")...)
	want(t, got, 0, metrics.JobLastRunFailed, "job", "engagement-daily", "shard", "1/3")
	want(t, got, 1, metrics.JobLastRunFailed, "job", "engagement-daily", "shard", "2/3")
	if f := got.Find(metrics.JobDuration, "shard", ""); len(f) != 0 {
		t.Errorf("a sharded run pushed to the unsharded group: %s", f)
	}
}

func TestNewPusherRefusesWhatItCannotUse(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"", "pushgateway:9091", "ftp://u:s3cr3t@pushgateway:9091", "http://", "http://u:s3cr3t@[::1",
		"http://u:s3cr3t@pushgateway:9091/?token=x", "mailto:ops@example.com",
	} {
		_, err := metrics.NewPusher(raw)
		if err == nil {
			t.Errorf("NewPusher(%q) accepted it", raw)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("NewPusher(%q) error repeats the password: %v", raw, err)
		}
	}
	for _, raw := range []string{"http://127.0.0.1:9091", "https://u:p@push.example.com/base/"} {
		if _, err := metrics.NewPusher(raw); err != nil {
			t.Errorf("NewPusher(%q): %v", raw, err)
		}
	}
}

// The URL's user info becomes basic auth, never part of the request path,
// a log line or an error.
func TestUserInfoIsBasicAuthAndNeverShown(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		paths []string
		auths []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		auths = append(auths, user+":"+pass)
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	withAuth := strings.Replace(srv.URL, "http://", "http://ops:s3cr3t@", 1) + "/gw"

	p := newPusher(t, withAuth)
	if strings.Contains(p.URL(), "s3cr3t") {
		t.Errorf("URL() = %s shows the password", p.URL())
	}
	err := p.Push(context.Background(), dailyRun(monday))
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "503") {
		t.Errorf("push to a gateway answering 503: error %v, want a 503 without the password", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 1 || paths[0] != "PUT /gw/metrics/job/engagement-daily" || auths[0] != "ops:s3cr3t" {
		t.Errorf("requests %v with basic auth %v, want one PUT /gw/metrics/job/engagement-daily as ops", paths, auths)
	}

	unreachable := newPusher(t, "http://ops:s3cr3t@127.0.0.1:1")
	err = unreachable.Push(context.Background(), dailyRun(monday))
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("push to nothing: error %v, want one without the password", err)
	}
}

// Issue 58: a queue-process run that stopped because its transport is
// paused (the bot refused the whole account) pushes
// engagement_transport_paused 1 for the pause's kind and 0 for the others;
// a run that was not paused pushes 0 for every kind, so the alert
// resolves.
func TestAPausedRunPushesThePause(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	p := newPusher(t, gw.URL)
	ctx := context.Background()
	paused := metrics.Run{Job: delivery.Job, Duration: time.Second, End: monday,
		Delivery: &delivery.ProcessSummary{Transport: "webhook", Stopped: "account_paused",
			Pause: &delivery.Pause{Transport: "webhook", Kind: "banned", StatusCode: 403, Active: true}}}
	if err := p.Push(ctx, paused); err != nil {
		t.Fatal(err)
	}
	got := gw.Metrics(t, "engagement_")
	for _, kind := range []string{"reachout_timelock", "rate_overlimit", "logged_out", "banned"} {
		v := 0.0
		if kind == "banned" {
			v = 1
		}
		want(t, got, v, metrics.TransportPaused, "job", "queue-process", "transport", "webhook", "kind", kind)
	}
	sent := metrics.Run{Job: delivery.Job, Duration: time.Second, End: tuesday,
		Delivery: &delivery.ProcessSummary{Transport: "webhook", Sent: 3}}
	if err := p.Push(ctx, sent); err != nil {
		t.Fatal(err)
	}
	got = gw.Metrics(t, "engagement_")
	want(t, got, 0, metrics.TransportPaused, "job", "queue-process", "transport", "webhook", "kind", "banned")
}
