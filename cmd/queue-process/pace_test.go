package main_test

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Three processes with --send-jitter keep the floor together (no two sends
// closer than the pace allows, CheckPace) and their gaps vary: on average
// half the jitter wider than the interval, so 9 sends span well over 8
// intervals.
func TestJitterAcrossThreeProcesses(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	b := newBot(t, false)
	queueMessages(t, pool, 9)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b.server.URL)
	const interval = 300 * time.Millisecond
	var wg sync.WaitGroup
	results := make([]cmdtest.Result, 3)
	for i := range results {
		wg.Go(func() {
			results[i] = cmdtest.Run(t, bin, env, "--send-interval", "300ms", "--send-jitter", "300ms", "--output", "json")
		})
	}
	wg.Wait()
	for i, res := range results {
		if res.Code != 0 {
			t.Fatalf("process %d: exit %d: %s", i, res.Code, res.Stderr)
		}
	}
	times, keys := b.received()
	if len(keys) != 9 {
		t.Fatalf("the bot got %d messages, want 9", len(keys))
	}
	fixture.CheckPace(t, times, interval)
	if span := times[8].Sub(times[0]); span < 8*interval*11/10 {
		t.Errorf("9 sends spanned %s: no wider than 8 intervals of %s, as if without jitter", span, interval)
	}
	gaps := make([]time.Duration, 0, 8)
	for i := 1; i < len(times); i++ {
		gaps = append(gaps, times[i].Sub(times[i-1]))
	}
	if slices.Max(gaps)-slices.Min(gaps) < interval/10 {
		t.Errorf("gaps %v do not vary", gaps)
	}
}

// --spread-budget spreads the day's budget over the waking hours: with
// quiet hours from 00:01 to 00:00 (one waking minute) and a budget of 30,
// one send every 2 s, at an --as-of inside the waking minute. The summary
// says the pace; and a pace the budget cannot fit in the waking hours is
// said at start.
func TestSpreadBudgetOverTheWakingHours(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	b := newBot(t, false)
	queueMessages(t, pool, 4)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+b.server.URL)
	asOf := time.Now().UTC().Truncate(24 * time.Hour).Add(24*time.Hour + 5*time.Second) // tomorrow, 00:00:05
	res := cmdtest.Run(t, bin, env, "--as-of", asOf.Format(time.RFC3339), "--allow-future-as-of",
		"--quiet-hours", "00:01-00:00", "--timezone", "UTC", "--daily-limit", "30", "--spread-budget", "--output", "json")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	var sum struct {
		Sent int
		Pace struct {
			Interval float64 `json:"interval_seconds"`
			Waking   float64 `json:"waking_seconds"`
			Spread   bool    `json:"spread"`
			Fits     bool    `json:"fits"`
		}
	}
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatal(err)
	}
	// The keys as docs/delivery.md names them (encoding/json would read
	// "Spread" into spread: look at the text).
	for _, key := range []string{`"interval_seconds":`, `"jitter_seconds":`, `"spread":`, `"waking_seconds":`, `"limit":`, `"needs_seconds":`, `"fits":`} {
		if !strings.Contains(res.Stdout, key) {
			t.Errorf("the summary's pace has no %s: %s", key, res.Stdout)
		}
	}
	if sum.Sent != 4 || sum.Pace.Interval != 2 || sum.Pace.Waking != 60 || !sum.Pace.Spread || !sum.Pace.Fits {
		t.Errorf("summary %+v, want 4 sent at one every 2 s, 30 in the waking minute", sum)
	}
	times, _ := b.received()
	fixture.CheckPace(t, times, 2*time.Second)

	res = cmdtest.Run(t, bin, env, "--quiet-hours", "21:00-09:00", "--daily-limit", "300", "--send-interval", "10m")
	if res.Code != 0 || !strings.Contains(res.Stderr, "does not fit in the waking hours") ||
		!strings.Contains(res.Stderr, "300 recipients × 10m0s a send on average = 50h0m0s, more than 12h0m0s") {
		t.Errorf("exit %d, stderr %s; want a warning that 300 × 10 min does not fit in 12 waking hours", res.Code, res.Stderr)
	}
}
