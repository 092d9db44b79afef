package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/seeded"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// openPool opens dbURL as engagement-console does (internal/postgres.Open:
// pgx's exec mode, the settings of the binary's pool), closed at cleanup.
func openPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := postgres.Open(context.Background(), dbURL, "engagement-console")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// consoleDatabase is a database of 300 seeded users on which the daily and
// weekly jobs ran as of seeded.AsOf, its URL and a pool opened as the
// binary opens it.
func consoleDatabase(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	return dbURL, seedConsole(t, dbURL)
}

// seedConsole seeds the migrated database dbURL as consoleDatabase does
// and returns a pool on it.
func seedConsole(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool := openPool(t, dbURL)
	ctx := context.Background()
	if _, err := seed.Generate(ctx, pool, seed.Options{Users: 300, Seed: 41, AsOf: seeded.AsOf}); err != nil {
		t.Fatal(err)
	}
	if _, err := scheduler.RunDaily(ctx, pool, scheduler.Config{AsOf: seeded.AsOf}); err != nil {
		t.Fatal(err)
	}
	if _, err := scheduler.RunWeekly(ctx, pool, scheduler.Config{AsOf: seeded.AsOf}); err != nil {
		t.Fatal(err)
	}
	return pool
}

// testClock is a wall clock a test moves: the console's Config.Clock.
type testClock struct{ ns atomic.Int64 }

func newTestClock(at time.Time) *testClock {
	c := &testClock{}
	c.ns.Store(at.UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// serveSnapshots serves cfg (with htpasswd auth, ops an operator, pages as of
// seeded.AsOf, and the test's logger) and returns the console and its
// server.
func serveSnapshots(t *testing.T, cfg console.Config) (*console.Console, *httptest.Server) {
	t.Helper()
	cfg.Auth = console.Auth{Users: htpasswd(t), Operators: []string{operator}}
	cfg.AsOf = func() time.Time { return seeded.AsOf }
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t))
	h, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

// getWithin is get, failing the test when the answer takes longer than
// limit: a page that waits for a blocked query never answers.
func getWithin(t *testing.T, srv *httptest.Server, path string, asJSON bool, limit time.Duration) (reply, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(operator, operatorPassword)
	if asJSON {
		req.Header.Set("Accept", "application/json")
	}
	return do(t, srv, req) // a timeout fails the test
}

// Issue 41: after any action the heavy pages took 8–20 s to come back at
// 1M users: the action dropped their snapshots, so the next load computed
// one while the operator waited. Now the next load answers at once from
// the last snapshot, marked as such, while a new one is read in the
// background. The new one is made to block on a real lock (another
// session holds ACCESS EXCLUSIVE on user_engagement_states, which the
// overview reads and the cancel does not touch): the page answers all the
// same, from the old snapshot; once the lock goes, the new one is served.
func TestPagesStayFastAfterAnAction(t *testing.T) {
	t.Parallel()
	_, pool := consoleDatabase(t)
	clock := newTestClock(time.Date(2026, 3, 2, 14, 2, 0, 0, time.UTC))
	c, srv := serveSnapshots(t, console.Config{Pool: pool, Clock: clock.Now})
	ctx := context.Background()

	var before console.Overview
	resp, body := getWithin(t, srv, "/", true, time.Minute)
	decode(t, body, &before)
	computed := resp.Header.Get("X-Computed-At")
	if resp.Header.Get("X-Refreshing") != "" {
		t.Fatalf("the first snapshot is marked as refreshing: %v", resp.Header)
	}
	clock.Advance(10 * time.Second)

	locker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback(ctx) //nolint:errcheck // released below; this is for a failure
	fixture.ConsoleLockStates(t, locker)

	form := url.Values{"csrf": {csrfToken(t, srv, operator, operatorPassword)}, "kind": {"weekly_review"}}
	resp, body = post(t, srv, "/actions/cancel/confirm", operator, operatorPassword, form)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", resp.StatusCode, body)
	}

	// The overview's new snapshot cannot be read while the lock is held:
	// the page answers from the old one.
	resp, body = getWithin(t, srv, "/", true, 15*time.Second)
	var stale console.Overview
	decode(t, body, &stale)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Computed-At") != computed || resp.Header.Get("X-Refreshing") != "true" {
		t.Errorf("after the action: %d, X-Computed-At %q (want the old %q), X-Refreshing %q (want true)",
			resp.StatusCode, resp.Header.Get("X-Computed-At"), computed, resp.Header.Get("X-Refreshing"))
	}
	if stale.Users != before.Users {
		t.Errorf("the stale overview has %d users, the old snapshot %d", stale.Users, before.Users)
	}
	_, html := getWithin(t, srv, "/", false, 15*time.Second)
	if !strings.Contains(html, "as of 14:02 UTC, refreshing…") || !strings.Contains(html, "newer ones are being read in the background") {
		t.Errorf("the stale page does not say so:\n%s", footer(html))
	}

	if err := locker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitRefreshed(ctx, "overview"); err != nil {
		t.Fatal(err)
	}
	resp, html = getWithin(t, srv, "/", false, 15*time.Second)
	if resp.Header.Get("X-Refreshing") != "" || resp.Header.Get("X-Computed-At") == computed || strings.Contains(html, "refreshing…") {
		t.Errorf("after the refresh: X-Computed-At %q (the old one was %q), X-Refreshing %q; footer:\n%s",
			resp.Header.Get("X-Computed-At"), computed, resp.Header.Get("X-Refreshing"), footer(html))
	}
}

// footer is the page's footer, for failure messages.
func footer(html string) string {
	if i := strings.Index(html, "<footer>"); i >= 0 {
		return html[i:]
	}
	return html
}

// Issue 41, point 5: any page view kept the background refresh querying
// for 15 minutes. Now a page is refreshed while it is being looked at:
// for MaxAge (two rounds) after its last view, then no more; a view after
// that answers at once from the last snapshot, marked stale, and
// refreshes it in the background. Time is the console's clock, moved by
// the test.
func TestRefreshStopsSoonAfterTheLastView(t *testing.T) {
	t.Parallel()
	_, pool := consoleDatabase(t)
	clock := newTestClock(time.Date(2026, 3, 2, 14, 0, 0, 0, time.UTC))
	c, srv := serveSnapshots(t, console.Config{Pool: pool, Clock: clock.Now, MaxAge: time.Minute})
	ctx := context.Background()

	// The first round computes every page (the overview's summary reads
	// the queue's and verify's snapshots when it is served, never waiting
	// for them).
	if got := c.RefreshRound(ctx); strings.Join(got, ",") != "overview,queue,verify,forecast" {
		t.Fatalf("the first round recomputed %v, want every page", got)
	}
	if got := c.RefreshRound(ctx); len(got) != 0 {
		t.Errorf("nobody looking, the round recomputed %v, want nothing", got)
	}
	if resp, _ := getWithin(t, srv, "/queue", true, time.Minute); resp.Header.Get("X-Refreshing") != "" { // viewed at 14:00
		t.Errorf("the queue's snapshot of the first round is marked stale at once")
	}
	for _, tc := range []struct {
		at   time.Duration
		want []string
	}{
		{30 * time.Second, []string{"queue"}},
		{59 * time.Second, []string{"queue"}},
		{61 * time.Second, nil},
		{14 * time.Minute, nil},
	} {
		clock.ns.Store(time.Date(2026, 3, 2, 14, 0, 0, 0, time.UTC).Add(tc.at).UnixNano())
		if got := c.RefreshRound(ctx); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s after the last view the round recomputed %v, want %v", tc.at, got, tc.want)
		}
	}
	// Back after a while: the last snapshot at once, marked, and a new one
	// read in the background.
	resp, _ := getWithin(t, srv, "/queue", true, time.Minute)
	if resp.Header.Get("X-Refreshing") != "true" {
		t.Errorf("a view 14 min after the last snapshot: X-Refreshing %q, want true", resp.Header.Get("X-Refreshing"))
	}
	if err := c.WaitRefreshed(ctx, "queue"); err != nil {
		t.Fatal(err)
	}
	resp, _ = getWithin(t, srv, "/queue", true, time.Minute)
	if resp.Header.Get("X-Refreshing") != "" || resp.Header.Get("X-Computed-At") != clock.Now().Format(time.RFC3339) {
		t.Errorf("after the background refresh: X-Refreshing %q, X-Computed-At %q; want a snapshot of now, %s",
			resp.Header.Get("X-Refreshing"), resp.Header.Get("X-Computed-At"), clock.Now().Format(time.RFC3339))
	}
	if got := c.RefreshRound(ctx); strings.Join(got, ",") != "queue" {
		t.Errorf("right after a view the round recomputed %v, want queue", got)
	}
}
