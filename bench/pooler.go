package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// The pooler suite: engagement-daily through PgBouncer in transaction mode
// against the same binary connected directly, on fresh copies of one
// seeded database, in the same run (issue 15's target: through the pooler
// at most 1.15× the direct time, at 1M users). The bouncer is Debian's
// pgbouncer with stock settings but pool_mode = transaction
// (internal/testkit/pgtest.StartBouncer, the one the pooler tests use), on a port
// of its own, stopped when the suite ends.

// poolerRound is one round: each connection's run on its own fresh copy.
type poolerRound struct {
	Direct      proc   `json:"direct"`
	Pooled      proc   `json:"pooled"`
	PooledFirst bool   `json:"pooled_first"` // the rounds alternate which runs first
	Moved       int    `json:"moved"`
	LoadAvg     string `json:"load_avg"` // when the round ended
}

type poolerResult struct {
	Machine    machine       `json:"machine"`
	AsOf       string        `json:"as_of"`
	Users      int           `json:"users"`
	SeedReused bool          `json:"seed_reused,omitempty"`
	Seed       proc          `json:"seed"`
	Bouncer    string        `json:"bouncer"` // its version line
	Rounds     []poolerRound `json:"rounds"`
	Direct     float64       `json:"direct_seconds"` // mean wall time
	Pooled     float64       `json:"pooled_seconds"`
	Ratio      float64       `json:"pooled_over_direct"`
}

// poolerTarget is issue 15's bound on pooled / direct.
const poolerTarget = 1.15

func runPooler(ctx context.Context, bin string, users, rounds int, seeded *templates) (res poolerResult, err error) {
	res = poolerResult{AsOf: asOf.Format(time.RFC3339), Users: users}
	src, _, seedRun, err := seeded.source(ctx, bin, users)
	if err != nil {
		return res, err
	}
	defer seeded.done(ctx, src)
	res.Seed, res.SeedReused = seedRun, seedRun == (proc{})

	srv, err := pgtest.ServerURL(ctx)
	if err != nil {
		return res, err
	}
	bouncer, err := pgtest.StartBouncer(ctx, srv)
	if err != nil {
		return res, err
	}
	defer func() {
		if stopErr := bouncer.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	res.Bouncer = bouncerVersion(ctx)
	fmt.Printf("pooler: %s on 127.0.0.1:%d, pool_mode = transaction\n", res.Bouncer, bouncer.Port())

	at := "--as-of=" + asOf.Format(time.RFC3339)
	name := fmt.Sprintf("engagement_benchtool_pooler_%d", users)
	defer pgtest.DropDatabase(context.WithoutCancel(ctx), name) //nolint:errcheck
	run := func(pooled bool) (proc, int, error) {
		direct, err := pgtest.CloneDatabase(ctx, src, name)
		if err != nil {
			return proc{}, 0, err
		}
		if _, err := checkpoint(ctx, direct); err != nil {
			return proc{}, 0, err
		}
		dbURL := direct
		if pooled {
			if dbURL, err = bouncer.PooledURL(direct); err != nil {
				return proc{}, 0, err
			}
		}
		var sum jobSummary
		p, err := runBinary(ctx, bin, "engagement-daily", dbURL, &sum, at, "--output=json")
		if err == nil && sum.Failed != 0 {
			err = fmt.Errorf("engagement-daily (pooled %v): %d users failed", pooled, sum.Failed)
		}
		return p, sum.Succeeded, err
	}
	var direct, pooled float64
	for i := range rounds {
		r := poolerRound{PooledFirst: i%2 == 1}
		var moved [2]int
		for _, viaPooler := range []bool{r.PooledFirst, !r.PooledFirst} {
			p, n, err := run(viaPooler)
			if err != nil {
				return res, err
			}
			if viaPooler {
				r.Pooled, moved[1] = p, n
			} else {
				r.Direct, moved[0] = p, n
			}
		}
		if moved[0] != moved[1] {
			return res, fmt.Errorf("pooler: the direct run moved %d users, the pooled one %d", moved[0], moved[1])
		}
		r.Moved, r.LoadAvg = moved[0], loadAvg()
		direct += r.Direct.Seconds
		pooled += r.Pooled.Seconds
		res.Rounds = append(res.Rounds, r)
		fmt.Printf("pooler: round %d: direct %.2f s, through PgBouncer %.2f s (%.2f×), %d users moved, load %s\n",
			i+1, r.Direct.Seconds, r.Pooled.Seconds, ratio(r.Pooled.Seconds, r.Direct.Seconds), r.Moved, r.LoadAvg)
	}
	res.Direct, res.Pooled = direct/float64(rounds), pooled/float64(rounds)
	res.Ratio = ratio(res.Pooled, res.Direct)
	return res, nil
}

// bouncerVersion is `pgbouncer --version`'s first line, or "pgbouncer".
func bouncerVersion(ctx context.Context) string {
	for _, path := range []string{"pgbouncer", "/usr/sbin/pgbouncer"} {
		if out, err := exec.CommandContext(ctx, path, "--version").Output(); err == nil {
			return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
		}
	}
	return "pgbouncer"
}

// loadAvg is the machine's load average (1, 5, 15 minutes), for the record.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func (r poolerResult) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## engagement-daily through PgBouncer (transaction mode) vs direct, %d users\n\n", r.Users)
	b.WriteString("| round | first | direct | through PgBouncer | pooled / direct | moved | load average |\n|---:|---|---:|---:|---:|---:|---|\n")
	for i, x := range r.Rounds {
		first := "direct"
		if x.PooledFirst {
			first = "pooled"
		}
		fmt.Fprintf(&b, "| %d | %s | %.2f s, %.0f MiB | %.2f s, %.0f MiB | %.2f | %d | %s |\n", i+1, first,
			x.Direct.Seconds, mib(x.Direct.MaxRSS), x.Pooled.Seconds, mib(x.Pooled.MaxRSS), ratio(x.Pooled.Seconds, x.Direct.Seconds), x.Moved, x.LoadAvg)
	}
	verdict := "met"
	if r.Ratio > poolerTarget {
		verdict = "NOT met"
	}
	fmt.Fprintf(&b, "\nmean: direct %.2f s, through PgBouncer %.2f s: **%.2f×** (target ≤ %.2f×: %s)\n", r.Direct, r.Pooled, r.Ratio, poolerTarget, verdict)
	return b.String()
}
