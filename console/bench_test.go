package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
	"github.com/engagement-scheduler/engagement/internal/testkit/consoledata"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
)

// pageBudget is every page's target at the benchmark's full size
// (consoledata.DefaultSizes), directly and through a transaction pooler.
const pageBudget = 300 * time.Millisecond

// benchSizes are consoledata.DefaultSizes, or BENCH_USERS users with as
// many times more messages and transitions (make bench-smoke's 10,000).
func benchSizes(b *testing.B) (consoledata.Sizes, bool) {
	sz := consoledata.DefaultSizes
	v := os.Getenv("BENCH_USERS")
	if v == "" {
		return sz, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("BENCH_USERS=%q is not a positive number", v)
	}
	full := n >= sz.Users
	if !full {
		sz = consoledata.Sizes{Users: n, Messages: n * sz.Messages / sz.Users, Transitions: n * sz.Transitions / sz.Users}
	}
	return sz, full
}

// benchAsOf is when the seeded history ends: the pages read as of it.
var benchAsOf = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// benchHoldout is the percent of the benchmark history's goodbyes held out.
const benchHoldout = 10

// BenchmarkPages times every page of the console at the sizes of
// benchSizes, directly and through PgBouncer in transaction mode, each
// page a whole HTTP request (auth, every query, rendering). It reports the
// median and the slowest of b.N requests per page, and fails a page whose
// slowest is over pageBudget at the full size. With CONSOLE_BENCH_PLANS
// set to a file, it writes there every statement's EXPLAIN ANALYZE (through
// auto_explain) from one request of each page.
func BenchmarkPages(b *testing.B) {
	sz, full := benchSizes(b)
	key := fmt.Sprintf("console-bench v2 schema %d %+v %s holdout %d%%", migrations.Latest, sz, benchAsOf, benchHoldout)
	url := pgtest.NewDatabaseFrom(b, key, func(ctx context.Context, url string) error {
		if err := migrations.Up(ctx, url); err != nil {
			return err
		}
		pool, err := pgxpool.New(ctx, url) // not the binaries' pool: the seeder's
		if err != nil {
			return err
		}
		defer pool.Close()
		start := time.Now()
		if err = consoledata.Seed(ctx, pool, sz, benchAsOf); err != nil {
			return err
		}
		// A 10 % holdout and two goodbye variants, as a team running one
		// would have (issue 45): the overview's arms at a realistic size.
		held, removed, err := consoledata.HoldOut(ctx, pool, benchHoldout)
		if err != nil {
			return err
		}
		if err := fixture.ConsoleAnalyzeMoves(ctx, pool); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "console bench: seeded %+v in %s, %d goodbyes held out (%d messages removed)\n",
			sz, time.Since(start).Round(time.Second), held, removed)
		return nil
	})
	bouncer := pgtest.NewBouncer(b)
	user, phone := someUser(b, url)
	pages := []string{"/", "/queue", "/runs", "/verify", "/users?id=" + user, "/forecast", "/audit"}

	if file := os.Getenv("CONSOLE_BENCH_PLANS"); file != "" {
		writePlans(b, url, pages, file)
	}
	for _, via := range []struct{ name, url string }{{"direct", url}, {"pgbouncer", bouncer.URL(b, url)}} {
		pool, err := postgres.Open(context.Background(), via.url, "engagement-console")
		if err != nil {
			b.Fatal(err)
		}
		type request struct {
			name string
			do   func(srv *httptest.Server) (reply, string)
		}
		var requests []request
		for _, p := range pages {
			name := strings.TrimPrefix(strings.SplitN(p, "?", 2)[0], "/")
			if name == "" {
				name = "overview"
			}
			requests = append(requests, request{name, func(srv *httptest.Server) (reply, string) { return get(b, srv, p, "", "", false) }})
		}
		// The user search by phone number (a POST, so the number is in no
		// URL): the JID indexes (migrations 46, 47) keep it off a scan.
		requests = append(requests, request{"search", func(srv *httptest.Server) (reply, string) {
			return post(b, srv, "/users", "", "", map[string][]string{"q": {phone}})
		}})
		for _, rq := range requests {
			b.Run(via.name+"/"+rq.name, func(b *testing.B) {
				srv := benchServer(b, pool) // a fresh console: its first request computes the snapshot
				// The first request computes a snapshot page's data (the
				// background refresh's work), the rest are served from it.
				start := time.Now()
				rq.do(srv)
				first := time.Since(start)
				times := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					resp, body := rq.do(srv)
					times = append(times, time.Since(start))
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("%s: %d %.300s", rq.name, resp.StatusCode, body)
					}
				}
				b.StopTimer()
				slices.Sort(times)
				median, slowest := times[len(times)/2], times[len(times)-1]
				b.ReportMetric(float64(median.Microseconds())/1000, "ms-median")
				b.ReportMetric(float64(slowest.Microseconds())/1000, "ms-max")
				b.ReportMetric(float64(first.Milliseconds()), "ms-first") // after ResetTimer, which drops metrics
				if full && slowest > pageBudget {
					b.Errorf("%s via %s: slowest %s of %d, over the %s budget", rq.name, via.name, slowest, b.N, pageBudget)
				}
			})
		}
		if dir := os.Getenv("CONSOLE_SCREENSHOTS"); dir != "" && via.name == "direct" {
			// The overview at this size, its lift above all (issue 45).
			ctx := browsertest.New(b)
			srv := benchServer(b, pool)
			browsertest.Run(b, ctx, chromedp.Navigate(srv.URL+"/#lift"), chromedp.WaitVisible("table.lift"))
			browsertest.Screenshot(b, ctx, filepath.Join(dir, fmt.Sprintf("overview-%d-users.png", sz.Users)))
		}
		pool.Close()
	}
}

// benchServer is the console over pool, open (the benchmark measures the
// pages, not bcrypt), as of benchAsOf.
func benchServer(b *testing.B, pool *pgxpool.Pool) *httptest.Server {
	h, err := console.New(console.Config{Pool: pool, AsOf: func() time.Time { return benchAsOf }, MaxAge: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv
}

// someUser is a user with moves and messages, for the user page, and
// their phone number, for the search.
func someUser(b *testing.B, url string) (id, phone string) {
	conn, err := pgxpool.New(context.Background(), url) // not the binaries' pool: the test's own lookup
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	id, phone = fixture.ConsoleLatestMovedUser(b, conn)
	return id, "+" + phone
}

// writePlans requests each page once over connections that have
// auto_explain report every statement's plan, with its actual rows and
// times, as a notice, and writes them to file.
func writePlans(b *testing.B, url string, pages []string, file string) {
	cfg, err := postgres.PoolConfig(context.Background(), url, "engagement-console")
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu    sync.Mutex
		plans []string
	)
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		plans = append(plans, n.Message)
		mu.Unlock()
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `LOAD 'auto_explain';
			SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on;
			SET auto_explain.log_buffers = on; SET auto_explain.log_level = notice`)
		return err
	}
	cfg.MaxConns = 1                                              // one connection: the plans come in the pages' order
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // not the binaries' pool: postgres.PoolConfig's, with auto_explain
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	srv := benchServer(b, pool)
	var out strings.Builder
	for _, p := range pages {
		mu.Lock()
		plans = nil
		mu.Unlock()
		get(b, srv, p, "", "", false)
		mu.Lock()
		fmt.Fprintf(&out, "==== GET %s\n\n%s\n\n", p, strings.Join(plans, "\n\n"))
		mu.Unlock()
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil { //nolint:gosec // the path the person running the benchmark chose
		b.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil { //nolint:gosec // the path the person running the benchmark chose
		b.Fatal(err)
	}
}
