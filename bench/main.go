// Command bench measures the engagement scheduler where the main module's
// `go test -bench` cannot: the real binaries as processes (wall time and
// peak RSS at 10k, 100k and 1M users, data generation included), and
// queue-process against River (riverqueue/river), a PostgreSQL job queue,
// doing the same HTTP call per job, the bare requests and the floor (the
// least a durable queue does: floor.go). It lives in its own module so
// River and the plotting library never enter the main module's
// dependencies.
//
//	cd bench && go run . -sizes 10000,100000,1000000   # scaling + queue, writes results/ and ../docs/scaling.png
//	cd bench && go run . -suites queue -messages 20000 # the queue comparison only
//	cd bench && go run . -suites paced,chaos           # queue-process's pacing, and faults
//	cd bench && go run . -suites pooler                # engagement-daily through PgBouncer vs direct, 1M users
//	cd bench && go run . -suites scaling -sizes 10000000 -jobs weekly -template-db seeded_10m
//
// It uses the PostgreSQL server the tests use (internal/testkit/pgtest: DATABASE_URL,
// else 127.0.0.1:5432, else a throwaway cluster) and the binaries in -bin
// (build them first: make build). Every database it makes is named
// engagement_benchtool_* and dropped at the end.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// asOf is the instant the data and the runs are relative to (the same as
// scheduler/bench_test.go's).
var asOf = time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)

func main() {
	var (
		suites   = flag.String("suites", "scaling,queue,paced,chaos,pooler", "what to run: scaling, queue, paced, chaos, pooler (comma-separated)")
		sizes    = flag.String("sizes", "10000,100000", "users per scaling point, comma-separated")
		jobs     = flag.String("jobs", "daily,weekly", "scaling: the jobs to run at each size (with their references), comma-separated")
		tmplDBs  = flag.String("template-db", "", "seeded databases to copy instead of seeding (comma-separated names; each serves the size its user count matches; never changed or dropped)")
		pUsers   = flag.Int("pooler-users", 1000000, "pooler: users of the database engagement-daily runs on, directly and through PgBouncer")
		pRounds  = flag.Int("pooler-rounds", 2, "pooler: rounds (a direct and a pooled run each, alternating which goes first)")
		messages = flag.Int("messages", 20000, "messages per queue contender")
		rounds   = flag.Int("rounds", 1, "queue rounds (each contender on a fresh database per round)")
		workers  = flag.String("workers", "default,4,16", "queue-process --workers values to run, comma-separated (default: no --workers flag)")
		only     = flag.String("contenders", "", "queue: only these contenders, comma-separated: queue-process, bare, floor (the least durable queue), river, \"queue-process no-op\" (--transport log to /dev/null), \"floor no-op\", \"river no-op\" (a worker that does nothing); empty: all")
		chaosFor = flag.Duration("chaos-limit", 3*time.Minute, "chaos: give up on draining the queue after this long, per case")
		onlyFlag = flag.String("paced-only", "", "paced: only the cases whose names contain this (e.g. \"80/s\"), and no two-transport check")
		seedFlag = flag.Uint64("seed", 1, "chaos: seed of the fake Cloud API's and the killer's random choices")
		bin      = flag.String("bin", "../bin", "directory of the built binaries (make build)")
		out      = flag.String("out", "results", "directory for the JSON results")
		plotPath = flag.String("plot", "../docs/scaling.png", "PNG of time and peak RSS vs users (scaling; empty: none)")
		serve    = flag.Duration("serve-paced-receiver", 0, "internal: be the paced suite's receiver, answering after this long")
		replot   = flag.String("replot", "", "only draw -plot from this scaling.json (measures nothing)")
	)
	flag.Parse()
	if *serve > 0 {
		if err := serveReceiver(*serve); err != nil {
			fmt.Fprintln(os.Stderr, "bench: receiver:", err)
			os.Exit(1)
		}
		return
	}
	if *replot != "" {
		var res scalingResult
		b, err := os.ReadFile(*replot)
		if err == nil {
			err = json.Unmarshal(b, &res)
		}
		if err == nil {
			err = plotScaling(res, *plotPath)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	o := options{jobs: *jobs, templateDBs: *tmplDBs, poolerUsers: *pUsers, poolerRounds: *pRounds, contenders: *only}
	if err := run(ctx, *suites, *sizes, *messages, *rounds, *workers, *bin, *out, *plotPath, *chaosFor, *seedFlag, *onlyFlag, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the flags of the suites that use a seeded database.
type options struct {
	jobs         string // scaling: -jobs
	templateDBs  string // -template-db
	poolerUsers  int
	poolerRounds int
	contenders   string // queue: -contenders
}

func run(ctx context.Context, suites, sizes string, messages, rounds int, workers, bin, out, plotPath string,
	chaosLimit time.Duration, seed uint64, pacedOnly string, o options) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	m, err := describeMachine(ctx)
	if err != nil {
		return err
	}
	fmt.Print(m.markdown())
	seeded, err := loadTemplates(ctx, o.templateDBs)
	if err != nil {
		return err
	}
	for _, s := range strings.Split(suites, ",") {
		switch strings.TrimSpace(s) {
		case "scaling":
			ns, err := ints(sizes)
			if err != nil {
				return fmt.Errorf("-sizes: %w", err)
			}
			jobs, err := parseJobs(o.jobs)
			if err != nil {
				return fmt.Errorf("-jobs: %w", err)
			}
			res, err := runScaling(ctx, bin, ns, jobs, seeded)
			if err != nil {
				return err
			}
			res.Machine = m
			fmt.Print(res.markdown())
			if err := writeJSON(filepath.Join(out, "scaling.json"), res); err != nil {
				return err
			}
			if plotPath != "" {
				if err := plotScaling(res, plotPath); err != nil {
					return err
				}
				fmt.Printf("\nplot: %s\n", plotPath)
			}
		case "queue":
			ws, err := workerCounts(workers)
			if err != nil {
				return fmt.Errorf("-workers: %w", err)
			}
			res, err := runQueue(ctx, bin, messages, rounds, ws, o.contenders)
			if err != nil {
				return err
			}
			res.Machine = m
			fmt.Print(res.markdown())
			if err := writeJSON(filepath.Join(out, "queue.json"), res); err != nil {
				return err
			}
		case "paced":
			res, err := runPaced(ctx, bin, pacedOnly)
			if err != nil {
				return err
			}
			res.Machine = m
			fmt.Print(res.markdown())
			if err := writeJSON(filepath.Join(out, "paced.json"), res); err != nil {
				return err
			}
		case "chaos":
			res, err := runChaos(ctx, bin, chaosLimit, seed)
			if err != nil {
				return err
			}
			res.Machine = m
			fmt.Print(res.markdown())
			if err := writeJSON(filepath.Join(out, "chaos.json"), res); err != nil {
				return err
			}
		case "pooler":
			if o.poolerUsers < 1 || o.poolerRounds < 1 {
				return fmt.Errorf("-pooler-users and -pooler-rounds must be positive")
			}
			res, err := runPooler(ctx, bin, o.poolerUsers, o.poolerRounds, seeded)
			if err != nil {
				return err
			}
			res.Machine = m
			fmt.Print(res.markdown())
			if err := writeJSON(filepath.Join(out, "pooler.json"), res); err != nil {
				return err
			}
		default:
			return fmt.Errorf("-suites: unknown suite %q (scaling, queue, paced, chaos, pooler)", s)
		}
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// workerCounts parses -workers: positive numbers, and "default" (0: no
// --workers flag).
func workerCounts(list string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(list, ",") {
		if strings.TrimSpace(f) == "default" {
			ns = append(ns, 0)
			continue
		}
		n, err := ints(f)
		if err != nil {
			return nil, err
		}
		ns = append(ns, n...)
	}
	return ns, nil
}

// ints parses a comma-separated list of positive numbers.
func ints(list string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}
