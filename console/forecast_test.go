package console_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/pricing"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Issue 42, item 6: the forecast did not model the timeouts of the
// goodbyes it forecasts: a user it said would get a goodbye on day 1 and
// not answer was never shown timing out, so its days 4 to 7 said nothing
// would go dormant. Here the forecast is read, and then the real binaries
// run those days: engagement-daily --as-of each day's instant, then
// queue-process --as-of the same instant delivering what it queued (as a
// */5 cron does minutes later), and each day's moves must be what the
// forecast said: goodbyes, and timeouts, its own goodbyes' included.
func TestTheForecastsGoodbyesTimeOutAsTheRealRunsDo(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	daily, queue := cmdtest.Build(t, "./cmd/engagement-daily"), cmdtest.Build(t, "./cmd/queue-process")
	asOf := fixture.Now(t, pool).Truncate(time.Second).UTC()
	const day = 24 * time.Hour
	// goodbyesOn[d] users fall silent so that day d's run sends them their
	// goodbye (their 14 days end half a day before it); one more, sent a
	// goodbye 36 hours ago that has no message (the bot set the state),
	// times out on day 1.
	goodbyesOn := map[int]int{1: 2, 2: 3, 3: 1, 4: 4, 6: 2}
	for d, n := range goodbyesOn {
		for range n {
			fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-14*day + time.Duration(d)*day - 12*time.Hour)})
		}
	}
	fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: asOf.Add(-16 * day),
		GoodbyeSentAt: fixture.Ptr(asOf.Add(-36 * time.Hour)), GoodbyeExpiresAt: fixture.Ptr(asOf.Add(12 * time.Hour))})

	srv := serve(t, pool, asOf)
	_, body := get(t, srv, "/forecast", viewer, viewerPassword, true)
	srv.Close()
	var f struct {
		Days []struct {
			AsOf                    time.Time `json:"as_of"`
			Goodbyes, Timeouts      int64
			ForecastGoodbyeTimeouts int64 `json:"forecast_goodbye_timeouts"`
		} `json:"days"`
	}
	decode(t, body, &f)
	if len(f.Days) != console.ForecastDays {
		t.Fatalf("forecast: %d days, want %d: %.500s", len(f.Days), console.ForecastDays, body)
	}

	env := cmdtest.Env("DATABASE_URL=" + url)
	moves := func(trigger string) int {
		return fixture.CountTransitions(t, pool, fixture.Moves{Trigger: trigger})
	}
	var real []string
	for d := 1; d <= console.ForecastDays; d++ {
		at := asOf.Add(time.Duration(d) * day)
		if !f.Days[d-1].AsOf.Equal(at) {
			t.Fatalf("forecast day %d is as of %s, want %s", d, f.Days[d-1].AsOf, at)
		}
		goodbyes, timeouts := moves("inactivity_14d"), moves("goodbye_timeout")
		stamp := at.Format(time.RFC3339Nano)
		if res := cmdtest.Run(t, daily, env, "--as-of", stamp, "--allow-future-as-of"); res.Code != 0 {
			t.Fatalf("engagement-daily --as-of %s: exit %d: %s", stamp, res.Code, res.Stderr)
		}
		if res := cmdtest.Run(t, queue, env, "--transport", "log", "--send-interval", "0", "--as-of", stamp, "--allow-future-as-of"); res.Code != 0 {
			t.Fatalf("queue-process --as-of %s: exit %d: %s", stamp, res.Code, res.Stderr)
		}
		goodbyes, timeouts = moves("inactivity_14d")-goodbyes, moves("goodbye_timeout")-timeouts
		real = append(real, fmt.Sprintf("day %d: %d goodbyes, %d timeouts", d, goodbyes, timeouts))
		fd := f.Days[d-1]
		if fd.Goodbyes != int64(goodbyes) || fd.Timeouts != int64(timeouts) {
			t.Errorf("day %d: the forecast said %d goodbyes and %d timeouts (%d of its own goodbyes'), the real run made %d and %d",
				d, fd.Goodbyes, fd.Timeouts, fd.ForecastGoodbyeTimeouts, goodbyes, timeouts)
		}
		if want := int64(goodbyesOn[d-console.ForecastGoodbyeTimeoutDays]); fd.ForecastGoodbyeTimeouts != want {
			t.Errorf("day %d: %d timeouts of the forecast's own goodbyes, want day %d's %d", d, fd.ForecastGoodbyeTimeouts,
				d-console.ForecastGoodbyeTimeoutDays, want)
		}
	}
	if t.Failed() {
		js, _ := json.Marshal(f.Days)
		t.Logf("the forecast: %s\nthe real runs: %q", js, real)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Type: "goodbye", Status: "sent"}); n != 12 {
		t.Errorf("%d goodbyes delivered, want the 12 the runs sent", n)
	}
}

// Issue 60: the forecast is the state machine's table's, not a hand list.
// Its columns are the daily job's timers (statemachine.Timers), each in
// every day's moves, and its cost is every kind a timer queues (but the
// reminder, queued on request only), each at its kind's category: a new
// timer and its kind appear in both without an edit to the console,
// status or pricing.
func TestTheForecastIsEveryTimersAndKinds(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	asOf := time.Now().UTC().Truncate(time.Second)
	fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-15 * 24 * time.Hour)}) // a goodbye on day 1
	srv := serve(t, pool, asOf)
	_, body := get(t, srv, "/forecast", viewer, viewerPassword, true)
	var f struct {
		Timers []console.ForecastTimer `json:"timers"`
		Days   []struct {
			AsOf  time.Time        `json:"as_of"`
			Moves map[string]int64 `json:"moves"`
		} `json:"days"`
		Cost pricing.Forecast `json:"cost"`
	}
	decode(t, body, &f)

	var timers []string
	wantKinds := map[sm.Message]sm.Category{}
	for _, tr := range sm.Timers() {
		timers = append(timers, string(tr.Trigger))
		if k, ok := sm.KindFiredBy(tr.Trigger); ok && !k.OnRequest {
			wantKinds[k.Message] = k.Category
		}
	}
	var got []string
	for _, tr := range f.Timers {
		got = append(got, tr.Trigger)
	}
	if !slices.Equal(got, timers) {
		t.Errorf("the forecast's timers are %q, want the table's %q", got, timers)
	}
	for _, d := range f.Days {
		for _, tr := range timers {
			if _, ok := d.Moves[tr]; !ok {
				t.Errorf("day %s has no count for the timer %s: %v", d.AsOf, tr, d.Moves)
			}
		}
	}
	if len(f.Cost.Kinds) != len(wantKinds) {
		t.Errorf("the cost covers %+v, want every kind a timer queues: %v", f.Cost.Kinds, wantKinds)
	}
	for _, k := range f.Cost.Kinds {
		if c, ok := wantKinds[k.Kind]; !ok || c != k.Category || k.USD == nil {
			t.Errorf("the cost's %+v: want one of %v, at its category, priced", k, wantKinds)
		}
	}
	if f.Cost.Goodbyes != 1 || f.Days[0].Moves[string(sm.Inactivity14d)] != 1 || f.Cost.USD == nil || *f.Cost.USD == 0 {
		t.Errorf("one user due a goodbye: cost %+v, day 1 %v; want 1 goodbye, priced", f.Cost, f.Days[0].Moves)
	}
	_, html := get(t, srv, "/forecast", viewer, viewerPassword, false)
	for _, tr := range f.Timers {
		if !strings.Contains(html, "<th>"+tr.Label+"</th>") {
			t.Errorf("the forecast page has no column for the timer %s (%q)", tr.Trigger, tr.Label)
		}
	}
}
