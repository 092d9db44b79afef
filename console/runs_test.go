package console_test

import (
	"context"
	"encoding/json"
	"html"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// runsPerJob is how many runs of a job the runs page lists.
const runsPerJob = 100

// runsAsOf is when the runs page of runHistory is read: a Wednesday
// afternoon, the day after the last runs.
var runsAsOf = time.Date(2026, 3, 4, 15, 0, 0, 0, time.UTC)

// runHistory runs the real jobs and queue-process over ten days and
// returns the database: the daily job each day at 06:00 UTC, the weekly
// job on the Mondays at 09:00, queue-process at 06:10 and 18:00 each day
// (run in this process as the binary runs, with the log transport). The
// database's clock cannot be turned back, so each run's row is dated when
// it ran in this schedule, as the funnel's history dates its log rows.
func runHistory(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	pool, url := pgtest.NewPool(t)
	first := time.Date(2026, 2, 23, 6, 0, 0, 0, time.UTC) // a Monday
	fixture.InactiveUsers(t, pool, 12, first.Add(-15*24*time.Hour))
	fixture.InactiveUsers(t, pool, 7, first.Add(-10*24*time.Hour))
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=log")
	for day := 0; day < 9; day++ {
		at := first.Add(time.Duration(day) * 24 * time.Hour)
		daily(t, pool, at, 40*time.Second+time.Duration(day)*3*time.Second)
		if at.Weekday() == time.Monday {
			weekly(t, pool, at.Add(3*time.Hour))
		}
		for _, h := range []time.Duration{10 * time.Minute, 12 * time.Hour} {
			before := lastRun(t, pool)
			if res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0"); res.Code != 0 {
				t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
			}
			dateRuns(t, pool, before, at.Add(h), 2*time.Second)
		}
	}
	return pool, url
}

func daily(t *testing.T, pool *pgxpool.Pool, at time.Time, took time.Duration) {
	t.Helper()
	before := lastRun(t, pool)
	if _, err := scheduler.RunDaily(context.Background(), pool, scheduler.Config{AsOf: at}); err != nil {
		t.Fatalf("daily as of %s: %v", at, err)
	}
	dateRuns(t, pool, before, at, took)
}

func weekly(t *testing.T, pool *pgxpool.Pool, at time.Time) {
	t.Helper()
	before := lastRun(t, pool)
	if _, err := scheduler.RunWeekly(context.Background(), pool, scheduler.Config{AsOf: at}); err != nil {
		t.Fatalf("weekly as of %s: %v", at, err)
	}
	dateRuns(t, pool, before, at, 25*time.Second)
}

func lastRun(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	run, _ := fixture.ConsoleLastIDs(t, pool)
	return run
}

// dateRuns dates the runs recorded since before (the largest id then):
// started at at, finished took later; queue-process's as of when it
// started, as without --as-of.
func dateRuns(t *testing.T, pool *pgxpool.Pool, before int64, at time.Time, took time.Duration) {
	t.Helper()
	fixture.ConsoleDateRuns(t, pool, before, at, at.Add(took))
}

// chart is a console.Chart as the page's JSON has it (decoded apart from
// the Go type, so that a field the page lacks reads as its zero).
type chart struct {
	X        []int64 `json:"x"`
	Numbered bool    `json:"numbered"`
	Weekly   bool    `json:"weekly"`
	Note     string  `json:"note"`
	Series   []struct {
		Label    string     `json:"label"`
		Values   []*float64 `json:"values"`
		Axis     string     `json:"axis"`
		Dashed   bool       `json:"dashed"`
		SpanGaps bool       `json:"span_gaps"`
	} `json:"series"`
}

// runsPage is the runs page's JSON.
type runsPage struct {
	Runs []struct {
		Job       string    `json:"job"`
		StartedAt time.Time `json:"started_at"`
		Status    string    `json:"status"`
		Moved     int64     `json:"moved"`
	} `json:"runs"`
	Jobs []struct {
		Job    string `json:"job"`
		Latest struct {
			StartedAt time.Time `json:"started_at"`
			Status    string    `json:"status"`
		} `json:"latest"`
		Completed *struct{} `json:"last_completed"`
		Runs      int       `json:"runs"`
	} `json:"jobs"`
}

// chartOf decodes the chart a page hands console.js in the data-chart
// attribute of the element with id.
func chartOf(t *testing.T, page, id string) chart {
	t.Helper()
	m := regexp.MustCompile(`id="` + id + `" data-chart="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no chart %s on the page", id)
	}
	var c chart
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &c); err != nil {
		t.Fatalf("chart %s: %v", id, err)
	}
	return c
}

// points are the x of a series' values (nil values are none).
func points(c chart, values []*float64) []int64 {
	var out []int64
	for i, v := range values {
		if v != nil {
			out = append(out, c.X[i])
		}
	}
	return out
}

// Issue 41, point 6: the runs chart mixed the daily and weekly runs into
// one line, and queue-process's runs were nowhere. Each job is its own
// line now, its points its own runs, and each job's latest run is listed.
func TestRunsPageHasALinePerJob(t *testing.T) {
	t.Parallel()
	pool, _ := runHistory(t)
	srv := serve(t, pool, runsAsOf)

	var r runsPage
	_, body := get(t, srv, "/runs", viewer, viewerPassword, true)
	decode(t, body, &r)
	count := map[string]int{}
	started := map[string][]int64{}
	for i := len(r.Runs) - 1; i >= 0; i-- {
		count[r.Runs[i].Job]++
		started[r.Runs[i].Job] = append(started[r.Runs[i].Job], r.Runs[i].StartedAt.Unix())
	}
	if count[scheduler.DailyJob] != 9 || count[scheduler.WeeklyJob] != 2 || count[delivery.Job] != 18 {
		t.Fatalf("runs by job %v, want 9 daily, 2 weekly, 18 queue-process", count)
	}
	var jobs []string
	for _, j := range r.Jobs {
		jobs = append(jobs, j.Job)
	}
	if len(r.Jobs) != 3 || jobs[0] != scheduler.DailyJob || jobs[1] != scheduler.WeeklyJob || jobs[2] != delivery.Job {
		t.Fatalf("jobs %v, want daily, weekly, queue-process", jobs)
	}
	q := r.Jobs[2]
	lastQueue := time.Date(2026, 3, 3, 18, 0, 0, 0, time.UTC)
	if !q.Latest.StartedAt.Equal(lastQueue) || q.Latest.Status != scheduler.RunSucceeded || q.Completed == nil || q.Runs != 18 {
		t.Errorf("queue-process's line: %+v, want its latest run (%s) succeeded, 18 runs", q, lastQueue)
	}
	sent := 0
	for _, run := range r.Runs {
		if run.Job == delivery.Job {
			sent += int(run.Moved)
		}
	}
	if sent != 12+7 {
		t.Errorf("queue-process's runs moved %d in all, want the 19 goodbyes they sent", sent)
	}

	_, page := get(t, srv, "/runs", viewer, viewerPassword, false)
	for _, id := range []string{"chart-runs", "chart-runs-work"} {
		c := chartOf(t, page, id)
		if c.Numbered {
			t.Errorf("%s: x are run ids, want when each run started", id)
		}
		var labels []string
		for _, s := range c.Series {
			labels = append(labels, s.Label)
		}
		if len(c.Series) != 3 {
			t.Fatalf("%s: series %v, want one per job", id, labels)
		}
		for i, job := range []string{scheduler.DailyJob, scheduler.WeeklyJob, delivery.Job} {
			s := c.Series[i]
			if s.Label != job || !s.SpanGaps {
				t.Errorf("%s: series %d is %q (span gaps %v), want %s's line", id, i, s.Label, s.SpanGaps, job)
			}
			if got := points(c, s.Values); !equalInts(got, started[job]) {
				t.Errorf("%s: %s's points at %v, want at its runs' starts %v", id, job, got, started[job])
			}
		}
	}

	// A queue-process every minute for two hours: the page still shows the
	// jobs' runs, and the latest RunsPerJob of queue-process.
	for i := range 120 {
		at := runsAsOf.Add(-2*time.Hour + time.Duration(i)*time.Minute)
		fixture.RecordRun(t, pool, fixture.RunRecord{Job: "queue-process", AsOf: at, StartedAt: at, FinishedAt: at.Add(time.Second),
			Status: "succeeded", Counters: `{"processed":0,"sent":0}`})
	}
	_, body = get(t, srv, "/runs", viewer, viewerPassword, true)
	r = runsPage{}
	decode(t, body, &r)
	count = map[string]int{}
	for _, run := range r.Runs {
		count[run.Job]++
	}
	if count[scheduler.DailyJob] != 9 || count[scheduler.WeeklyJob] != 2 || count[delivery.Job] != runsPerJob {
		t.Errorf("138 queue-process runs, runs by job %v; want 9 daily, 2 weekly, %d queue-process", count, runsPerJob)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Issue 41, point 6: the funnel's reactivation line dropped for the last
// cohorts only because their 30 days were not over. Those cohorts are a
// dashed line of their own, joined to the solid one at the last closed
// cohort, with a note; the x are the cohorts' Mondays, ticks on each.
func TestFunnelChartDrawsOpenCohortsApart(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	srv := serve(t, h.pool, historyAsOf)
	var o console.Overview
	_, body := get(t, srv, "/", viewer, viewerPassword, true)
	decode(t, body, &o)
	_, page := get(t, srv, "/", viewer, viewerPassword, false)
	c := chartOf(t, page, "chart-funnel")

	if !c.Weekly || len(c.X) != len(o.Funnel) {
		t.Fatalf("funnel chart: weekly %v, %d x; want weekly ticks, one x per cohort (%d)", c.Weekly, len(c.X), len(o.Funnel))
	}
	lastClosed := -1
	for i, w := range o.Funnel {
		if c.X[i] != w.WeekStart.Unix() || w.WeekStart.Weekday() != time.Monday {
			t.Errorf("x %d is %s, want the cohort's Monday %s", i, time.Unix(c.X[i], 0).UTC(), w.WeekStart)
		}
		if w.WindowClosed {
			lastClosed = i
		}
	}
	if lastClosed < 0 || lastClosed == len(o.Funnel)-1 {
		t.Fatalf("the history's cohorts: last closed %d of %d; the test needs closed and open ones", lastClosed, len(o.Funnel))
	}
	closed, open := c.Series[len(c.Series)-2], c.Series[len(c.Series)-1]
	if closed.Dashed || !open.Dashed || closed.Axis != "y2" || open.Axis != "y2" || c.Note == "" {
		t.Fatalf("the share's series: %+v and %+v (note %q), want a solid line and a dashed one, with a note", closed, open, c.Note)
	}
	for i, w := range o.Funnel {
		cl, op := closed.Values[i], open.Values[i]
		switch {
		case w.WindowClosed && (cl == nil || *cl != w.ReactivatedShare):
			t.Errorf("closed cohort %s: solid line at %v, want %v", w.WeekStart.Format(time.DateOnly), cl, w.ReactivatedShare)
		case !w.WindowClosed && cl != nil:
			t.Errorf("open cohort %s is on the solid line (%v)", w.WeekStart.Format(time.DateOnly), *cl)
		case !w.WindowClosed && (op == nil || *op != w.ReactivatedShare):
			t.Errorf("open cohort %s: dashed line at %v, want %v", w.WeekStart.Format(time.DateOnly), op, w.ReactivatedShare)
		case w.WindowClosed && i != lastClosed && op != nil:
			t.Errorf("closed cohort %s is on the dashed line", w.WeekStart.Format(time.DateOnly))
		}
	}
	if op := open.Values[lastClosed]; op == nil {
		t.Errorf("the dashed line does not start at the last closed cohort")
	}
}
