package console

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/status"
)

// Runs is the runs page: the latest RunsPerJob runs of each job, newest
// first, and each job's latest run.
type Runs struct {
	Runs []Run     `json:"runs"`
	Jobs []JobRuns `json:"jobs"`
	AsOf time.Time `json:"as_of"`
}

// JobRuns is one job's line on the runs page: its latest run, and its
// latest that completed (succeeded or partial).
type JobRuns struct {
	Job       string `json:"job"`
	Latest    Run    `json:"latest"`
	Completed *Run   `json:"last_completed,omitempty"`
	// Runs is how many of its runs the page shows.
	Runs int `json:"runs"`
}

// Run is one job run.
type Run struct {
	ID         int64           `json:"id"`
	Job        string          `json:"job"`
	Shard      string          `json:"shard,omitempty"`
	AsOf       time.Time       `json:"as_of"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	Status     string          `json:"status"`
	Counters   json.RawMessage `json:"counters"`
	Error      string          `json:"error,omitempty"`
	// Seconds is how long it ran (so far, while running).
	Seconds float64 `json:"seconds"`
	// Moved is how many users it moved or messages it queued or sent: the
	// counters' processed, or sent for queue-process.
	Moved int64 `json:"moved"`
	// Ago is how long before the page's as-of it started ("3 h ago").
	Ago string `json:"-"`
}

// Summary is the counters' totals in a line: "processed 5 · queued 5".
func (r Run) Summary() string {
	var c map[string]any
	if json.Unmarshal(r.Counters, &c) != nil {
		return ""
	}
	var parts []string
	for _, k := range []string{"processed", "succeeded", "failed", "skipped", "queued", "duplicates", "sent", "retried", "cancelled", "deferred"} {
		if v, ok := c[k].(float64); ok {
			parts = append(parts, fmt.Sprintf("%s %d", k, int64(v)))
		}
	}
	if v, ok := c["stopped"].(string); ok && v != "" { // queue-process stopped before the queue was drained
		parts = append(parts, "stopped: "+v)
	}
	return strings.Join(parts, " · ")
}

// RunsPerJob is how many of each job's latest runs the runs page shows.
const RunsPerJob = 100

func (s *server) runs(r *http.Request, src source) (Runs, error) {
	var out Runs
	err := src.read(r.Context(), func(tx pgx.Tx, asOf time.Time) error {
		out.AsOf = asOf
		// The latest RunsPerJob of each job and shard hold the latest
		// RunsPerJob of each job, its shards together, that the page shows.
		runs, err := status.ReadRuns(r.Context(), tx, RunsPerJob)
		if err != nil {
			return err
		}
		slices.SortFunc(runs, func(a, b status.Run) int { // newest first
			return cmp.Or(b.StartedAt.Compare(a.StartedAt), cmp.Compare(b.ID, a.ID))
		})
		out.Runs = []Run{}
		shown := map[string]int{}
		for _, row := range runs {
			if shown[row.Job]++; shown[row.Job] > RunsPerJob {
				continue
			}
			run := Run{ID: row.ID, Job: row.Job, Shard: row.Shard, AsOf: row.AsOf, StartedAt: row.StartedAt,
				FinishedAt: row.FinishedAt, Status: row.Status, Counters: row.RawCounters, Error: row.Error}
			if run.Counters == nil { // none recorded
				run.Counters = json.RawMessage(`{}`)
			}
			end := asOf
			if run.FinishedAt != nil {
				end = *run.FinishedAt
			}
			run.Seconds = max(0, end.Sub(run.StartedAt).Seconds())
			run.Moved = moved(run.Job, run.Counters)
			run.Ago = ago(asOf, run.StartedAt)
			out.Runs = append(out.Runs, run)
		}
		out.Jobs = jobRuns(out.Runs)
		return nil
	})
	return out, err
}

// jobRuns is each job's line, from its runs newest first: the daily job,
// the weekly job, queue-process, then any other by name.
func jobRuns(runs []Run) []JobRuns {
	var out []JobRuns
	at := map[string]int{}
	for _, r := range runs {
		i, ok := at[r.Job]
		if !ok {
			i = len(out)
			at[r.Job] = i
			out = append(out, JobRuns{Job: r.Job, Latest: r})
		}
		j := &out[i]
		j.Runs++
		if j.Completed == nil && (r.Status == scheduler.RunSucceeded || r.Status == scheduler.RunPartial) {
			j.Completed = &r
		}
	}
	slices.SortFunc(out, func(a, b JobRuns) int {
		return cmp.Or(cmp.Compare(jobOrder(a.Job), jobOrder(b.Job)), cmp.Compare(a.Job, b.Job))
	})
	return out
}

// moved reads the counters' processed (the jobs) or sent (queue-process,
// whose processed counts retries and failures too).
func moved(job string, counters []byte) int64 {
	var c struct {
		Processed *int64 `json:"processed"`
		Sent      *int64 `json:"sent"`
	}
	if json.Unmarshal(counters, &c) != nil {
		return 0
	}
	switch {
	case job == delivery.Job && c.Sent != nil:
		return *c.Sent
	case c.Processed != nil:
		return *c.Processed
	case c.Sent != nil:
		return *c.Sent
	}
	return 0
}
