package console_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
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
	var asOf time.Time
	if err := pool.QueryRow(t.Context(), `SELECT date_trunc('second', now())`).Scan(&asOf); err != nil {
		t.Fatal(err)
	}
	asOf = asOf.UTC()
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
		return fixture.Count(t, pool, `SELECT count(*) FROM engagement_state_transitions WHERE trigger = $1`, trigger)
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
	if n := fixture.Count(t, pool, `SELECT count(*) FROM engagement_message_queue WHERE message_type = 'goodbye' AND status = 'sent'`); n != 12 {
		t.Errorf("%d goodbyes delivered, want the 12 the runs sent", n)
	}
}
