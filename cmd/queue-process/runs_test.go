package main_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// recordedRun is a queue-process row of engagement_job_runs.
type recordedRun struct {
	ID                  int64
	AsOf, Started       time.Time
	Finished            *time.Time
	Status, Error, Host string
	PID                 int
	Counters            map[string]any
}

func queueRuns(t *testing.T, pool *pgxpool.Pool) []recordedRun {
	t.Helper()
	var out []recordedRun
	for _, row := range fixture.RunsOfJob(t, pool, "queue-process") {
		r := recordedRun{ID: row.ID, AsOf: row.AsOf, Started: row.StartedAt, Finished: row.FinishedAt, Status: row.Status,
			Error: row.Error, Host: row.Hostname, PID: row.PID}
		if err := json.Unmarshal([]byte(row.Counters), &r.Counters); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// Issue 41, point 6: queue-process wrote no run, so the Runs page could not
// say whether delivery runs. Each run of the binary is one row of
// engagement_job_runs, its counters the JSON summary it printed.
func TestEachRunIsRecordedWithItsSummary(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	// The receiver refuses every second message for good (a 4xx is not
	// retried): the run sends some and fails some, so it is partial.
	var calls atomic.Int64
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1)%2 == 0 {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(failing.Close)
	queueMessages(t, pool, 6)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+failing.URL)

	asOf := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	first := cmdtest.Run(t, bin, env, "--output", "json", "--send-interval", "0", "--workers", "1",
		"--as-of", asOf.Format(time.RFC3339), "--allow-future-as-of")
	if first.Code != 0 {
		t.Fatalf("exit %d: %s", first.Code, first.Stderr)
	}
	// A second run finds nothing due: it is recorded too (delivery ran).
	second := cmdtest.Run(t, bin, env, "--output", "json")
	if second.Code != 0 {
		t.Fatalf("exit %d: %s", second.Code, second.Stderr)
	}

	runs := queueRuns(t, pool)
	if len(runs) != 2 {
		t.Fatalf("%d queue-process runs recorded, want one per run (2): %+v", len(runs), runs)
	}
	for i, res := range []cmdtest.Result{first, second} {
		var sum map[string]any
		if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
			t.Fatalf("run %d: stdout is not the JSON summary: %v: %s", i, err, res.Stdout)
		}
		r := runs[i]
		if sum["run_id"] != float64(r.ID) {
			t.Errorf("run %d: the summary's run_id is %v, its row's id %d", i, sum["run_id"], r.ID)
		}
		for _, k := range []string{"processed", "sent", "retried", "failed", "cancelled", "deferred", "duration_ms"} {
			if r.Counters[k] != sum[k] {
				t.Errorf("run %d: the row's %s is %v, the summary's %v", i, k, r.Counters[k], sum[k])
			}
		}
		if r.Finished == nil || r.Finished.Before(r.Started) || r.Host == "" || r.PID == 0 || r.Error != "" {
			t.Errorf("run %d: %+v, want finished after it started, with its host and pid, no error", i, r)
		}
	}
	if runs[0].Counters["sent"] != float64(3) || runs[0].Counters["failed"] != float64(3) || runs[0].Status != "partial" {
		t.Errorf("the first run: %s with %v, want partial: 3 sent, 3 failed", runs[0].Status, runs[0].Counters)
	}
	if !runs[0].AsOf.Equal(asOf) {
		t.Errorf("the first run is as of %s, want its --as-of %s", runs[0].AsOf, asOf)
	}
	if runs[1].Status != "succeeded" || runs[1].Counters["processed"] != float64(0) {
		t.Errorf("the second run: %s with %v, want succeeded with nothing processed", runs[1].Status, runs[1].Counters)
	}
	if d := runs[1].AsOf.Sub(runs[1].Started); d < -time.Second || d > time.Second {
		t.Errorf("without --as-of the run is as of %s, started %s: want the database clock", runs[1].AsOf, runs[1].Started)
	}
}

// Runs of queue-process work alongside one another: a run that starts
// while another delivers neither waits for it nor marks it abandoned, and
// each records its own outcome. A run in progress is 'delivering' (the
// status of a run that holds no lease: the jobs' unique index on 'running'
// runs, which the previous release's job binaries name, leaves it out).
// One killed with SIGKILL stays 'delivering' until the next run finds its
// process gone and marks it abandoned, as the jobs' next run does.
func TestRunsSideBySideAndAKilledOneIsAbandoned(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	b := newBot(t, true) // the first request hangs until hold is closed
	queueMessages(t, pool, 2)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b.server.URL)

	slow, _, slowErr := cmdtest.Command(bin, env, "--send-interval", "0", "--workers", "1")
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	var release sync.Once
	t.Cleanup(func() { // when the test stops half-way
		release.Do(func() { close(b.hold) })
		_ = slow.Process.Kill()
	})
	<-b.arrived // slow holds one message, in flight
	beside := cmdtest.Run(t, bin, env, "--send-interval", "0")
	if beside.Code != 0 {
		t.Fatalf("a run beside another: exit %d: %s", beside.Code, beside.Stderr)
	}
	runs := queueRuns(t, pool)
	if len(runs) != 2 || runs[0].Status != "delivering" || runs[1].Status != "succeeded" {
		t.Fatalf("while one run delivers, another ran: %+v; want the first still delivering, the second succeeded", runs)
	}
	release.Do(func() { close(b.hold) })
	if err := slow.Wait(); err != nil {
		t.Fatalf("the first run: %v: %s", err, slowErr)
	}
	runs = queueRuns(t, pool)
	if sent := runs[0].Counters["sent"].(float64) + runs[1].Counters["sent"].(float64); runs[0].Status != "succeeded" || sent != 2 {
		t.Errorf("the first run ended: %+v, want succeeded, the two runs' sent adding up to 2", runs)
	}

	// kill -9 in the middle of a send.
	queueMessages(t, pool, 1)
	b2 := newBot(t, true)
	env2 := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b2.server.URL)
	killed, _, _ := cmdtest.Command(bin, env2, "--send-interval", "0")
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	<-b2.arrived
	_ = killed.Process.Signal(syscall.SIGKILL)
	_ = killed.Wait()
	close(b2.hold)
	if runs = queueRuns(t, pool); len(runs) != 3 || runs[2].Status != "delivering" {
		t.Fatalf("after SIGKILL: %+v, want the killed run still delivering", runs)
	}
	next := cmdtest.Run(t, bin, env2, "--send-interval", "0")
	if next.Code != 0 {
		t.Fatalf("the next run: exit %d: %s", next.Code, next.Stderr)
	}
	runs = queueRuns(t, pool)
	if len(runs) != 4 || runs[2].Status != "abandoned" || runs[2].Finished == nil || runs[3].Status != "succeeded" {
		t.Fatalf("after the next run: %+v, want the killed run abandoned and the next succeeded", runs)
	}
	if runs[2].Error == "" || runs[2].PID != killed.Process.Pid {
		t.Errorf("the abandoned run: %+v, want why (its process %d is gone)", runs[2], killed.Process.Pid)
	}
}
