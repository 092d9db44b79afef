package main_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pushtest"
)

// dailySummary is the part of the JSON summary the metrics mirror.
type dailySummary struct {
	Steps map[string]struct {
		Processed, Succeeded, Failed, Skipped, Queued, Duplicates int
	} `json:"steps"`
	Queued   int `json:"queued"`
	Delivery *struct {
		Transport             string
		Sent, Retried, Failed int
	} `json:"delivery"`
}

func wantSample(t *testing.T, got pushtest.Samples, want float64, name string, labels ...string) {
	t.Helper()
	v, ok := got.Value(name, labels...)
	switch {
	case !ok:
		t.Errorf("the gateway has no single %s%v; it has:\n%s", name, labels, got)
	case v != want:
		t.Errorf("%s%v = %v, want %v", name, labels, v, want)
	}
}

// The acceptance test of the metrics: a run with a Pushgateway pushes the
// documented metrics with the summary's values; a failed run after it
// records the failure and keeps the last success.
func TestPushesTheRunsMetricsToThePushgateway(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	t.Logf("real prometheus-pushgateway: %v", gw.Real)
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 25, lastWeekOfOctober)
	fixture.User(t, pool, fixture.UserOptions{LastActivity: lastWeekOfOctober, OptedOut: true})

	before := time.Now()
	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url, "PUSHGATEWAY_URL="+gw.URL),
		"--as-of", asOf, "--output", "json", "--transport", "log", "--send-interval", "0")
	after := time.Now()
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	var sum dailySummary
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatalf("summary: %v\n%s", err, res.Stdout)
	}
	if sum.Queued != 25 || sum.Delivery == nil || sum.Delivery.Sent != 25 {
		t.Fatalf("summary queued %d, delivery %+v: want 25 queued and sent", sum.Queued, sum.Delivery)
	}

	got := gw.Metrics(t, "engagement_")
	job := func(kv ...string) []string { return append([]string{"job", "engagement-daily"}, kv...) }
	for _, step := range []string{"inactivity_14d", "goodbye_timeout", "reminder_due"} {
		c, ok := sum.Steps[step]
		if !ok {
			t.Fatalf("the summary lacks step %s", step)
		}
		wantSample(t, got, float64(c.Processed), metrics.JobUsersProcessed, job("step", step)...)
		wantSample(t, got, float64(c.Succeeded), metrics.JobUsers, job("step", step, "outcome", "succeeded")...)
		wantSample(t, got, float64(c.Failed), metrics.JobUsers, job("step", step, "outcome", "failed")...)
		wantSample(t, got, float64(c.Skipped), metrics.JobUsers, job("step", step, "outcome", "skipped")...)
		wantSample(t, got, float64(c.Queued), metrics.JobMessages, job("step", step, "result", "queued")...)
		wantSample(t, got, float64(c.Duplicates), metrics.JobMessages, job("step", step, "result", "duplicates")...)
	}
	// The seeded values, not only the summary's echo.
	wantSample(t, got, 25, metrics.JobMessages, job("step", "inactivity_14d", "result", "queued")...)
	wantSample(t, got, 1, metrics.JobUsers, job("step", "inactivity_14d", "outcome", "skipped")...)
	wantSample(t, got, 25, metrics.DeliveryMessages, job("transport", "log", "result", "sent")...)
	wantSample(t, got, 0, metrics.DeliveryMessages, job("transport", "log", "result", "failed")...)
	wantSample(t, got, 0, metrics.JobLastRunFailed, job()...)

	lastSuccess, ok := got.Value(metrics.JobLastSuccess, job()...)
	if !ok || lastSuccess < float64(before.Unix()) || lastSuccess > float64(after.Unix()+1) {
		t.Errorf("%s = %v (found %v), want between %d and %d", metrics.JobLastSuccess, lastSuccess, ok, before.Unix(), after.Unix())
	}
	if d, ok := got.Value(metrics.JobDuration, job()...); !ok || d <= 0 || d > after.Sub(before).Seconds() {
		t.Errorf("%s = %v (found %v), want within the run's %s", metrics.JobDuration, d, ok, after.Sub(before))
	}
	if !strings.Contains(res.Stderr, `"message":"metrics pushed"`) {
		t.Errorf("the log does not say the metrics were pushed: %s", res.Stderr)
	}

	// A run that fails (here: the schema is missing) records the failure
	// and leaves the last success and its counters alone.
	failStart := time.Now()
	failed := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+pgtest.NewEmptyDatabase(t), "PUSHGATEWAY_URL="+gw.URL), "--as-of", asOf)
	if failed.Code != 1 {
		t.Fatalf("run on an unmigrated database: exit %d, want 1: %s", failed.Code, failed.Stderr)
	}
	got = gw.Metrics(t, "engagement_")
	wantSample(t, got, lastSuccess, metrics.JobLastSuccess, job()...)
	wantSample(t, got, 1, metrics.JobLastRunFailed, job()...)
	wantSample(t, got, 25, metrics.JobMessages, job("step", "inactivity_14d", "result", "queued")...)
	if f, ok := got.Value(metrics.JobLastFailure, job()...); !ok || f < float64(failStart.Unix()) {
		t.Errorf("%s = %v (found %v), want the failed run's end", metrics.JobLastFailure, f, ok)
	}
}

// TestWithoutAPushgatewayNothingIsAttempted runs the binary as a process:
// it catches any HTTP request through HTTP_PROXY, which net/http reads from
// the process's own environment.
func TestWithoutAPushgatewayNothingIsAttempted(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 5, lastWeekOfOctober)

	// Any HTTP request the run makes lands here: through the proxy
	// variables for any remote host, and on the Pushgateway's default
	// address when this test can listen on it.
	var requests atomic.Int64
	count := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	proxy := httptest.NewServer(count)
	defer proxy.Close()
	if l, err := net.Listen("tcp", "127.0.0.1:9091"); err == nil {
		srv := &http.Server{Handler: count}
		go func() { _ = srv.Serve(l) }()
		defer srv.Close()
	} else if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatal(err)
	} else {
		t.Log("127.0.0.1:9091 is taken; counting through the proxy variables only")
	}

	res := cmdtest.Run(t, bin, cmdtest.Env("DATABASE_URL="+url, "HTTP_PROXY="+proxy.URL, "HTTPS_PROXY="+proxy.URL),
		"--as-of", asOf, "--output", "json")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("a run without --pushgateway-url made %d HTTP requests, want none", n)
	}
	if strings.Contains(res.Stderr, "metrics") || strings.Contains(res.Stderr, "pushgateway") {
		t.Errorf("a run without a Pushgateway logs about metrics: %s", res.Stderr)
	}
}

// Pushing is never the run's problem: an unreachable gateway is a warning,
// and the URL's password is in no line.
func TestAnUnreachablePushgatewayLeavesTheOutcomeAlone(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 5, lastWeekOfOctober)

	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url, "PUSHGATEWAY_URL=http://ops:s3cr3t-pw@127.0.0.1:1"),
		"--as-of", asOf, "--output", "json", "--fail-on-partial")
	if res.Code != 0 {
		t.Fatalf("exit %d with an unreachable Pushgateway, want 0: %s", res.Code, res.Stderr)
	}
	var sum dailySummary
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil || sum.Queued != 5 {
		t.Errorf("summary %+v (%v), want the run's 5 queued goodbyes", sum, err)
	}
	var warned bool
	for _, line := range cmdtest.Lines(res.Stderr) {
		var entry struct{ Level, Message, Pushgateway string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("log line is not JSON: %q", line)
		}
		if entry.Level == "warn" && strings.Contains(entry.Message, "could not push metrics") {
			warned = true
			if entry.Pushgateway != "http://xxxxx:xxxxx@127.0.0.1:1" {
				t.Errorf("the warning names the gateway %q, want it with its user info masked", entry.Pushgateway)
			}
		}
	}
	if !warned {
		t.Errorf("no warning about the failed push: %s", res.Stderr)
	}
	if strings.Contains(res.Stderr, "s3cr3t-pw") {
		t.Errorf("the log holds the Pushgateway's password: %s", res.Stderr)
	}
}

func TestPushgatewayURLIsCheckedBeforeAnyWork(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 3, lastWeekOfOctober)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", nil, []string{"--pushgateway-url", "ftp://ops:s3cr3t-pw@pushgateway:9091"}},
		{"environment", []string{"PUSHGATEWAY_URL=pushgateway:9091"}, nil},
		{"unparsable", []string{"PUSHGATEWAY_URL=http://ops:s3cr3t-pw@[::1"}, nil},
	} {
		res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env(append([]string{"DATABASE_URL=" + url}, tc.env...)...), append([]string{"--as-of", asOf}, tc.args...)...)
		if res.Code != 2 || len(cmdtest.Lines(res.Stderr)) != 1 || !strings.Contains(res.Stderr, "--pushgateway-url") {
			t.Errorf("%s: exit %d, stderr %q: want exit 2 and one line naming --pushgateway-url", tc.name, res.Code, res.Stderr)
		}
		if strings.Contains(res.Stderr, "s3cr3t-pw") {
			t.Errorf("%s: stderr repeats the password: %s", tc.name, res.Stderr)
		}
	}
	if n := fixture.CountRuns(t, pool, fixture.Runs{}); n != 0 {
		t.Errorf("%d runs recorded, want none: a bad URL stops the run before any work", n)
	}
}

// A dry run writes nothing, and pushes nothing either: its counters would
// pass for a real run's, and its "success" would hide a stale job.
func TestADryRunPushesNothing(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 3, lastWeekOfOctober)

	res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url, "PUSHGATEWAY_URL="+gw.URL), "--as-of", asOf, "--dry-run")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	if got := gw.Metrics(t, "engagement_"); len(got) != 0 {
		t.Errorf("a dry run pushed:\n%s", got)
	}
	if !strings.Contains(res.Stderr, "dry run: no metrics pushed") {
		t.Errorf("the log does not say the dry run pushed nothing: %s", res.Stderr)
	}
}

// Each shard of a sharded run pushes to a group of its own.
func TestAShardPushesToItsOwnGroup(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	pool, url := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 20, lastWeekOfOctober)

	queued := map[string]int{}
	for _, shard := range []string{"0/2", "1/2"} {
		res := cmdtest.Exec(t, jobcmd.NewDailyCommand, cmdtest.Env("DATABASE_URL="+url, "PUSHGATEWAY_URL="+gw.URL), "--as-of", asOf, "--shard", shard, "--output", "json")
		if res.Code != 0 {
			t.Fatalf("shard %s: exit %d: %s", shard, res.Code, res.Stderr)
		}
		var sum dailySummary
		if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
			t.Fatal(err)
		}
		queued[shard] = sum.Queued
	}
	if queued["0/2"]+queued["1/2"] != 20 {
		t.Fatalf("the shards queued %v, want 20 in all", queued)
	}
	got := gw.Metrics(t, "engagement_")
	for shard, n := range queued {
		wantSample(t, got, float64(n), metrics.JobMessages, "job", "engagement-daily", "shard", shard, "step", "inactivity_14d", "result", "queued")
	}
	if f := got.Find(metrics.JobDuration, "shard", ""); len(f) != 0 {
		t.Errorf("a sharded run pushed to the unsharded group: %s", f)
	}
}
