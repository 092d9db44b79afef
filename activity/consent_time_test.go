package activity_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

func optedOut(t *testing.T, db fixture.DB, user string) bool {
	t.Helper()
	return fixture.ProfileOf(t, db, user).ReengagementOptOut
}

// sqlCall is one call of the contract's SQL functions, as a bot makes it.
func sqlCall(t *testing.T, db fixture.DB, optOut bool, user, source string, at time.Duration) bool {
	t.Helper()
	return fixture.ActivityBotConsent(t, db, optOut, user, source, at)
}

// Issue 56, finding 1: consent follows the user's time, not the calls'
// arrival. A "stop" said now, then a "resume" said an hour earlier
// arriving later (Meta resends late), leaves the user opted out, and the
// late resume is in the log as superseded; one said after the stop wins.
// Through the SQL functions, as a bot calls them.
func TestConsentFollowsTheUsersTimeThroughSQL(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	user := withMessages(t, tx)

	if !sqlCall(t, tx, true, user, "bot:keyword", 0) {
		t.Fatal("the stop changed nothing")
	}
	if sqlCall(t, tx, false, user, "meta:user_preferences", -time.Hour) {
		t.Error("engagement_opt_in(..., now() - interval '1 hour') after a stop said now: true; want false (older: superseded)")
	}
	if !optedOut(t, tx, user) {
		t.Fatal("a resume said an hour before the stop, arriving after it, opted the user back in")
	}
	ev := consentEvents(t, tx, user)
	if len(ev) != 2 || !ev[0].OptedOut || ev[0].Superseded || ev[1].OptedOut || !ev[1].Superseded || ev[1].Source != "meta:user_preferences" {
		t.Errorf("consent log %+v; want the stop, then the late resume recorded as superseded", ev)
	}
	// The same late resume again (Meta resends it) is in the log already.
	sqlCall(t, tx, false, user, "meta:user_preferences", -time.Hour)
	if n := len(consentEvents(t, tx, user)); n != 2 {
		t.Errorf("a resend of the superseded resume: %d log rows, want 2 (recorded once)", n)
	}
	// Said after the stop, a resume wins, whenever it comes.
	if !sqlCall(t, tx, false, user, "bot:keyword", time.Second) || optedOut(t, tx, user) {
		t.Error("a resume said after the stop did not opt the user back in")
	}
}

// The tie rule: an opt-out and an opt-in said at the same instant leave
// the user opted out ("rather say nothing"), in either order.
func TestConsentAtTheSameInstantOptOutWins(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	at := fixture.Now(t, tx).Add(-time.Minute).Truncate(time.Microsecond)
	for _, outFirst := range []bool{true, false} {
		user := withMessages(t, tx)
		first, second := activity.OptIn, activity.OptOut
		if outFirst {
			first, second = activity.OptOut, activity.OptIn
		}
		if _, err := first(ctx, tx, user, activity.SourceKeyword, activity.ConsentOptions{At: at}); err != nil {
			t.Fatal(err)
		}
		if _, err := second(ctx, tx, user, activity.SourceMetaPreferences, activity.ConsentOptions{At: at}); err != nil {
			t.Fatal(err)
		}
		if !optedOut(t, tx, user) {
			t.Errorf("opt-out first %v: a stop and a resume at the same instant left the user opted in; want out", outFirst)
		}
	}
}

// A newer "stop" that changes nothing (the user was opted out already)
// still counts as the user's newest wish: a "resume" said between the two
// stops, arriving last, is older than it. A superseded opt-out with
// Confirm queues no confirmation and cancels nothing.
func TestARepeatedWishIsTheNewest(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	now := fixture.Now(t, tx).Truncate(time.Microsecond)
	user := withMessages(t, tx)
	call := func(optOut bool, ago time.Duration, confirm bool) activity.ConsentOutcome {
		t.Helper()
		out, err := activity.Consent(ctx, tx, user, optOut, activity.SourceKeyword,
			activity.ConsentOptions{At: now.Add(-ago), Confirm: confirm})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := call(true, 3*time.Hour, false); out != activity.ConsentChanged {
		t.Fatalf("the first stop: %s", out)
	}
	if out := call(true, time.Hour, false); out != activity.ConsentUnchanged {
		t.Errorf("the second stop: %s, want unchanged", out)
	}
	if out := call(false, 2*time.Hour, false); out != activity.ConsentSuperseded || !optedOut(t, tx, user) {
		t.Errorf("a resume said between the two stops: %s, opted out %v; want superseded, still out", out, optedOut(t, tx, user))
	}

	// Back in (said now), then an older opt-out asking for its
	// confirmation: superseded, so nothing cancelled and nothing queued.
	if out := call(false, 0, false); out != activity.ConsentChanged {
		t.Fatalf("the resume said now: %s", out)
	}
	fixture.SetMessages(t, tx, fixture.MessageChange{User: user, Status: "cancelled", SetStatus: "pending", CancelReason: fixture.Ptr("")})
	if out := call(true, 30*time.Minute, true); out != activity.ConsentSuperseded {
		t.Errorf("an opt-out said before the resume: %s, want superseded", out)
	}
	if optedOut(t, tx, user) {
		t.Error("a superseded opt-out opted the user out")
	}
	n := 0
	for _, m := range fixture.MessageRows(t, tx, fixture.Messages{Users: []string{user}}) {
		if m.Status == "cancelled" || m.MessageType == "opt_out_confirmation" {
			n++
		}
	}
	if n != 0 {
		t.Errorf("a superseded opt-out with Confirm cancelled or queued %d messages, want none", n)
	}
}

// A user with no consent event yet (an adopted database where the bot set
// the flag itself) keeps the old behaviour: the first call compares with
// the flag, whatever its instant.
func TestTheFirstCallComparesWithTheFlag(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	user := withMessages(t, tx)
	fixture.SetProfile(t, tx, user, fixture.ProfileChange{OptedOut: fixture.Ptr(true)})
	out, err := activity.Consent(ctx, tx, user, false, activity.SourceKeyword,
		activity.ConsentOptions{At: fixture.Now(t, tx).Add(-48 * time.Hour)})
	if err != nil || out != activity.ConsentChanged || optedOut(t, tx, user) {
		t.Errorf("an old resume for a user the bot opted out: %s, %v, opted out %v; want changed, in", out, err, optedOut(t, tx, user))
	}
}

// 1,000 stops and resumes with random instants, on 4 connections at once:
// the flag ends as the newest wish says (at its instant, an opt-out over an
// opt-in), and the log is exact: its changes alternate, each newer than
// the one before, the last one the newest wish's way; every call that was not
// the newest when it ran is there as superseded, once.
func TestConsentFlapsOnFourConnectionsLeaveAnExactLog(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	user := withMessages(t, pool)
	base := fixture.Now(t, pool).Add(-time.Hour).Truncate(time.Second)
	type call struct {
		optOut bool
		at     time.Time
	}
	calls := make([]call, 1000)
	r := rand.New(rand.NewPCG(56, 1)) //nolint:gosec // seeded: the same calls from run to run
	for i := range calls {
		// Seconds from a span of 300: many ties, many repeats.
		calls[i] = call{r.IntN(2) == 0, base.Add(time.Duration(r.IntN(300)) * time.Second)}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(calls))
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(calls); i += 4 {
				c := calls[i]
				if _, err := activity.Consent(ctx, pool, user, c.optOut, fmt.Sprintf("flap:%d", i),
					activity.ConsentOptions{At: c.at}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	newest := calls[0]
	for _, c := range calls[1:] {
		if c.at.After(newest.at) || (c.at.Equal(newest.at) && c.optOut && !newest.optOut) {
			newest = c
		}
	}
	if got := optedOut(t, pool, user); got != newest.optOut {
		t.Errorf("after the flaps: opted out %v; the newest wish (%s) says %v", got, newest.at, newest.optOut)
	}
	ev := consentEvents(t, pool, user)
	var changes []consentEvent
	superseded := map[string]int{}
	for _, e := range ev {
		if e.Superseded {
			superseded[e.Source]++
			continue
		}
		if n := len(changes); n > 0 {
			prev := changes[n-1]
			if e.OptedOut == prev.OptedOut || e.At.Before(prev.At) || (e.At.Equal(prev.At) && !e.OptedOut) {
				t.Fatalf("change %+v after %+v: changes must alternate, each newer than the last", e, prev)
			}
		}
		changes = append(changes, e)
	}
	if len(changes) == 0 || changes[len(changes)-1].OptedOut != newest.optOut || changes[len(changes)-1].At.After(newest.at) {
		t.Fatalf("changes %+v: want the last one the newest wish's way (%v), said no later than it (%s)", changes, newest.optOut, newest.at)
	}
	for src, n := range superseded {
		if n != 1 {
			t.Errorf("%s: logged superseded %d times, want once", src, n)
		}
	}
	// Each call ran once, so the log has each source at most once, and a
	// call is superseded only when a newer one had run: at least one must
	// have been, with so many.
	if len(superseded) == 0 || len(ev) > len(calls) {
		t.Errorf("%d log rows, %d superseded: want some superseded, no more rows than calls", len(ev), len(superseded))
	}
}
