package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// The paced suite: queue-process with --send-interval against a bot that
// answers after receiverDelay, as many processes at once as a case says.
// The receiver notes when each request arrives; the pace is judged there,
// where a provider's rate limit would be.

// receiverDelay is how long the paced receiver takes to answer.
const receiverDelay = 200 * time.Millisecond

// pacedCase is one paced run.
type pacedCase struct {
	name      string
	interval  time.Duration // 0: no --send-interval flag (the binary's default)
	processes int
	workers   int // --workers per process; 0: no flag
	messages  int
	// load runs the case beside two CPU burners and a connection keeping
	// PostgreSQL busy: the pace's floor under load (issue 59).
	load bool
}

// pacedCases are the runs of the suite: the Cloud API's default 80/s from
// one and from three processes, 20/s, and the default interval.
var pacedCases = []pacedCase{
	{"80/s, 1 process", 12500 * time.Microsecond, 1, 32, 1000, false},
	{"80/s, 3 processes", 12500 * time.Microsecond, 3, 32, 1000, false},
	{"20/s, 1 process", 50 * time.Millisecond, 1, 32, 240, false},
	{"20/s, 3 processes, default --workers", 50 * time.Millisecond, 3, 0, 240, false},
	{"default interval, 3 processes, default flags", 0, 3, 0, 20, false},
	{"floor under load: 10/s, 3 processes, 2 CPU burners, a busy database", 100 * time.Millisecond, 3, 0, 310, true},
}

// floorTolerance is the pace's documented floor: two requests on one
// transport are at least the interval less this apart at the receiver.
const floorTolerance = 20 * time.Millisecond

// pacedRun is what one paced case measured.
type pacedRun struct {
	Name       string  `json:"name"`
	IntervalMS float64 `json:"interval_ms"`
	Configured float64 `json:"configured_per_second"`
	Processes  int     `json:"processes"`
	Flags      string  `json:"flags"` // each process's
	Queued     int     `json:"queued"`
	Requests   int     `json:"requests"`         // at the receiver
	Keys       int     `json:"distinct_keys"`    // distinct Idempotency-Keys among them
	Sent       int     `json:"sent"`             // the processes' summaries, summed
	Steady     float64 `json:"steady_seconds"`   // first to last request arrival
	Rate       float64 `json:"per_second"`       // (requests - 1) / steady
	Percent    float64 `json:"percent_of_rate"`  // of Configured
	MaxWindow  int     `json:"max_in_1s_window"` // most requests in any 1-second window
	MinGapMS   float64 `json:"min_gap_ms"`       // least time between two consecutive arrivals
	ShortGaps  int     `json:"gaps_under_half"`  // consecutive arrivals less than half the interval apart
	// UnderFloor counts consecutive arrivals closer than the floor, the
	// interval less floorTolerance.
	UnderFloor int  `json:"gaps_under_floor"`
	Loaded     bool `json:"beside_load"` // two CPU burners and a busy database
	// The receiver's own stalls during the run (a 1 ms sleep that took
	// longer): arrivals it timed late, and so bunched, on a busy machine.
	StallMaxMS float64 `json:"receiver_stall_max_ms"`
	Stalls10ms int     `json:"receiver_stalls_over_10ms"`
	// ReceiverNice is the receiver process's nice value (-10 when the
	// tool could raise its priority, else 0).
	ReceiverNice int `json:"receiver_nice"`
	// StallsMS are the receiver's stalls over 10 ms: [start, length], the
	// start in ms after the first arrival.
	StallsMS [][2]float64 `json:"receiver_stalls_ms,omitempty"`
	// ArrivalsMS are the arrivals, in ms after the first, for a closer look.
	ArrivalsMS   []float64 `json:"arrivals_ms"`
	WallSeconds  float64   `json:"wall_seconds"`     // start of the first process to exit of the last
	Errors       string    `json:"errors,omitempty"` // processes that did not exit 0
	ConfiguredBy string    `json:"configured_by"`    // the interval as given, or the binary's default
}

// isolationRun is the two-transport check: a log transport with its own
// pace, alone and then beside a slow paced webhook on the same queue.
type isolationRun struct {
	Seconds       float64 `json:"seconds"` // --max-duration of each process
	LogFlags      string  `json:"log_flags"`
	WebhookFlags  string  `json:"webhook_flags"`
	LogAlone      int     `json:"log_sent_alone"`
	LogBeside     int     `json:"log_sent_beside_webhook"`
	WebhookBeside int     `json:"webhook_sent_beside_log"`
	Errors        string  `json:"errors,omitempty"`
}

type pacedResult struct {
	Machine   machine      `json:"machine"`
	Runs      []pacedRun   `json:"runs"`
	Isolation isolationRun `json:"isolation"`
}

// runPaced runs the paced cases whose names contain only (all when empty),
// then the two-transport check (unless only is set).
func runPaced(ctx context.Context, bin, only string) (pacedResult, error) {
	var res pacedResult
	defInterval, err := time.ParseDuration(flagDefault(ctx, bin, "queue-process", "send-interval"))
	if err != nil || defInterval <= 0 {
		return res, fmt.Errorf("queue-process --help states no positive default --send-interval: %v", err)
	}
	for _, c := range pacedCases {
		if only != "" && !strings.Contains(c.name, only) {
			continue
		}
		r, err := runPacedCase(ctx, bin, c, defInterval)
		if err != nil {
			return res, fmt.Errorf("paced %s: %w", c.name, err)
		}
		res.Runs = append(res.Runs, r)
		fmt.Printf("paced: %s: %.1f/s of %.1f/s (%.0f%%), max %d in 1 s, min gap %.1f ms, %d of %d gaps under the floor (%s), %d requests, %d sent\n",
			r.Name, r.Rate, r.Configured, r.Percent, r.MaxWindow, r.MinGapMS, r.UnderFloor, max(r.Requests-1, 0),
			time.Duration(r.IntervalMS*float64(time.Millisecond))-floorTolerance, r.Requests, r.Sent)
	}
	if only != "" {
		return res, nil
	}
	iso, err := runIsolation(ctx, bin)
	if err != nil {
		return res, fmt.Errorf("paced isolation: %w", err)
	}
	res.Isolation = iso
	fmt.Printf("paced: log transport %d sends alone, %d beside a slow paced webhook (which sent %d)\n",
		iso.LogAlone, iso.LogBeside, iso.WebhookBeside)
	return res, nil
}

// pacedDatabase makes a fresh database with n due messages.
func pacedDatabase(ctx context.Context, n int) (string, func(), error) {
	const name = "engagement_benchtool_paced"
	dbURL, err := pgtest.CreateDatabase(ctx, name)
	if err != nil {
		return "", nil, err
	}
	drop := func() { pgtest.DropDatabase(context.WithoutCancel(ctx), name) } //nolint:errcheck
	pool, err := pgxpool.New(ctx, dbURL)
	if err == nil {
		err = seedQueue(ctx, pool, n)
		pool.Close()
	}
	if err != nil {
		drop()
		return "", nil, err
	}
	return dbURL, drop, nil
}

func runPacedCase(ctx context.Context, bin string, c pacedCase, defInterval time.Duration) (pacedRun, error) {
	interval, by := c.interval, c.interval.String()
	if interval == 0 {
		interval, by = defInterval, "default "+defInterval.String()
	}
	configured := float64(time.Second) / float64(interval)
	// Enough time for every message at the configured rate, and then some;
	// a slower engine is stopped there and measured on what it sent.
	maxDuration := time.Duration(float64(c.messages)/configured*1.3*float64(time.Second)) + 3*time.Second

	dbURL, drop, err := pacedDatabase(ctx, c.messages)
	if err != nil {
		return pacedRun{}, err
	}
	defer drop()
	recv, err := startReceiverProcess(ctx, receiverDelay)
	if err != nil {
		return pacedRun{}, err
	}
	defer recv.close()

	flags := []string{"--transport=webhook", "--webhook-secret=" + webhookSecret, "--output=json",
		"--max-duration=" + maxDuration.String()}
	if c.interval > 0 {
		flags = append(flags, "--send-interval="+c.interval.String())
	}
	if c.workers > 0 {
		flags = append(flags, fmt.Sprint("--workers=", c.workers))
	}
	run := pacedRun{Name: c.name, IntervalMS: float64(interval) / float64(time.Millisecond), Configured: configured,
		Processes: c.processes, Flags: strings.Join(flags, " "), Queued: c.messages, ConfiguredBy: by}

	pctx, cancel := context.WithTimeout(ctx, maxDuration+time.Minute)
	defer cancel()
	if c.load {
		stop, err := startLoad(pctx, dbURL)
		if err != nil {
			return run, err
		}
		defer stop()
		run.Loaded = true
	}
	start := time.Now()
	var procs []*background
	for range c.processes {
		p, err := startBinary(pctx, bin, "queue-process", dbURL, append(flags, "--webhook-url="+recv.url)...)
		if err != nil {
			return run, err
		}
		procs = append(procs, p)
	}
	var errs []string
	for _, p := range procs {
		var sum runSummary
		if err := p.wait(&sum); err != nil {
			errs = append(errs, oneLineErr(err))
		}
		run.Sent += sum.Sent
	}
	run.WallSeconds = time.Since(start).Seconds()
	run.Errors = strings.Join(errs, "; ")
	rep, err := recv.report()
	if err != nil {
		return run, err
	}
	run.StallMaxMS, run.Stalls10ms = float64(rep.StallMaxNS)/float64(time.Millisecond), rep.StallsOver10ms
	run.ReceiverNice = rep.Nice
	at := rep.sorted()
	run.Keys = rep.Keys
	var steady, minGap time.Duration
	run.Requests, steady, run.MaxWindow, minGap = pace(at)
	run.Steady = steady.Seconds()
	if run.Requests > 1 && steady > 0 {
		run.Rate = float64(run.Requests-1) / steady.Seconds()
		run.Percent = 100 * run.Rate / configured
		run.MinGapMS = float64(minGap) / float64(time.Millisecond)
	}
	for _, st := range rep.Stalls {
		if len(at) > 0 {
			ms := func(ns int64) float64 { return math.Round(float64(ns)/float64(time.Millisecond)*10) / 10 }
			run.StallsMS = append(run.StallsMS, [2]float64{ms(st[0] - at[0].UnixNano()), ms(st[1])})
		}
	}
	for i := range at {
		run.ArrivalsMS = append(run.ArrivalsMS, math.Round(float64(at[i].Sub(at[0]))/float64(time.Millisecond)*10)/10)
		if i > 0 && at[i].Sub(at[i-1]) < interval/2 {
			run.ShortGaps++
		}
		if i > 0 && at[i].Sub(at[i-1]) < interval-floorTolerance {
			run.UnderFloor++
		}
	}
	return run, nil
}

// startLoad starts two CPU burners and a connection to dbURL running a
// busy query over and over; stop ends them.
func startLoad(ctx context.Context, dbURL string) (stop func(), err error) {
	var burners []*exec.Cmd
	for range 2 {
		b := exec.Command("sh", "-c", "while :; do :; done")
		if err := b.Start(); err != nil {
			for _, b := range burners {
				_ = b.Process.Kill()
				_ = b.Wait()
			}
			return nil, err
		}
		burners = append(burners, b)
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pool, err := pgxpool.New(lctx, dbURL)
		if err != nil {
			return
		}
		defer pool.Close()
		for lctx.Err() == nil {
			_, _ = pool.Exec(lctx, `SELECT sum(i) FROM generate_series(1, 200000) i`)
		}
	}()
	return func() {
		cancel()
		<-done
		for _, b := range burners {
			_ = b.Process.Kill()
			_ = b.Wait()
		}
	}, nil
}

// runIsolation runs a log transport paced at 80/s for isolationSeconds
// on a queue of its own, then again on a fresh queue beside a webhook
// paced at 20/s whose receiver takes receiverDelay to answer. Each
// transport has its own pace, so the log transport should send as many
// messages beside the webhook as alone.
func runIsolation(ctx context.Context, bin string) (isolationRun, error) {
	const seconds = 8
	const n = 3000 // more than either can send in the time
	dur := fmt.Sprintf("--max-duration=%ds", seconds)
	logFlags := []string{"--transport=log", "--send-interval=12.5ms", "--output=json", dur}
	hookFlags := []string{"--transport=webhook", "--webhook-secret=" + webhookSecret, "--send-interval=50ms",
		"--workers=32", "--output=json", dur}
	iso := isolationRun{Seconds: seconds, LogFlags: strings.Join(logFlags, " "), WebhookFlags: strings.Join(hookFlags, " ")}
	var errs []string

	// Alone.
	dbURL, drop, err := pacedDatabase(ctx, n)
	if err != nil {
		return iso, err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	p, err := startBinary(pctx, bin, "queue-process", dbURL, logFlags...)
	if err != nil {
		drop()
		return iso, err
	}
	var sum runSummary
	if err := p.wait(&sum); err != nil {
		errs = append(errs, "log alone: "+oneLineErr(err))
	}
	iso.LogAlone = sum.Sent
	drop()

	// Beside the slow webhook, started first so that it holds the pace.
	dbURL, drop, err = pacedDatabase(ctx, n)
	if err != nil {
		return iso, err
	}
	defer drop()
	recv, err := startReceiverProcess(ctx, receiverDelay)
	if err != nil {
		return iso, err
	}
	defer recv.close()
	hook, err := startBinary(pctx, bin, "queue-process", dbURL, append(hookFlags, "--webhook-url="+recv.url)...)
	if err != nil {
		return iso, err
	}
	time.Sleep(500 * time.Millisecond)
	logp, err := startBinary(pctx, bin, "queue-process", dbURL, logFlags...)
	if err != nil {
		hook.kill()
		return iso, err
	}
	var logSum, hookSum runSummary
	if err := logp.wait(&logSum); err != nil {
		errs = append(errs, "log beside webhook: "+oneLineErr(err))
	}
	if err := hook.wait(&hookSum); err != nil {
		errs = append(errs, "webhook beside log: "+oneLineErr(err))
	}
	iso.LogBeside, iso.WebhookBeside = logSum.Sent, hookSum.Sent
	iso.Errors = strings.Join(errs, "; ")
	return iso, nil
}

// oneLineErr is err's text on one line, clipped, for a table cell.
func oneLineErr(err error) string {
	var ee interface{ ExitCode() int }
	s := strings.Join(strings.Fields(err.Error()), " ")
	if errors.As(err, &ee) {
		s = fmt.Sprintf("exit %d: %s", ee.ExitCode(), s)
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func (r pacedResult) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Paced: queue-process --send-interval against a bot answering after %s\n\n", receiverDelay)
	b.WriteString("Rate: (requests − 1) / (last arrival − first arrival) at the receiver. Window: most requests arriving in any 1-second window. Targets: ≥ 95% of the configured rate, no window above it.\n\n")
	b.WriteString("| case | interval | processes | queued | requests (distinct keys) | sent | rate | % of configured | max in 1 s (limit) | min gap | gaps < interval/2 | gaps < floor | receiver stalls > 10 ms (longest) | wall |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, q := range r.Runs {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d (%d) | %d | %.1f/s | %.0f%% | %d (%d) | %.1f ms | %d | %d | %d (%.0f ms) | %.1f s |\n",
			q.Name, q.ConfiguredBy, q.Processes, q.Queued, q.Requests, q.Keys, q.Sent, q.Rate, q.Percent,
			q.MaxWindow, int(q.Configured+0.5), q.MinGapMS, q.ShortGaps, q.UnderFloor, q.Stalls10ms, q.StallMaxMS, q.WallSeconds)
	}
	fmt.Fprintf(&b, "\nArrivals are the kernel's receive times of the requests' bytes (SO_TIMESTAMPNS), not the receiver's handler's. The floor: the interval less %s.\n", floorTolerance)
	if len(r.Runs) > 0 {
		fmt.Fprintf(&b, "\nThe receiver is a process of its own at nice %d (stalls: a 1 ms sleep in it that overslept; each delays the arrival times it notes).\n", r.Runs[0].ReceiverNice)
	}
	b.WriteString("\nFlags of each process (plus --webhook-url):\n\n")
	for _, q := range r.Runs {
		fmt.Fprintf(&b, "- %s: `%s`\n", q.Name, q.Flags)
		if q.Errors != "" {
			fmt.Fprintf(&b, "  - not exit 0: %s\n", q.Errors)
		}
	}
	i := r.Isolation
	fmt.Fprintf(&b, "\nTwo transports, one queue, %.0f s each: the log transport (`%s`) sent **%d** alone and **%d** beside a webhook (`%s`, bot answering after %s; it sent %d). Target: the same (each transport its own pace).\n",
		i.Seconds, i.LogFlags, i.LogAlone, i.LogBeside, i.WebhookFlags, receiverDelay, i.WebhookBeside)
	if i.Errors != "" {
		fmt.Fprintf(&b, "\nNot exit 0: %s\n", i.Errors)
	}
	return b.String()
}
