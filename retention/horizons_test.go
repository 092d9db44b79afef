package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/retention"
)

// Issue 44, point 3: the transition log and the consent events age out by
// their own horizons, each user's latest row kept whatever its age (the
// latest consent event is what says a user opted out); 0 keeps them all;
// a dry run counts what a run deletes.
func TestCleanupHorizonsKeepEachUsersLatestRow(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	asOf := time.Now().UTC()
	old := asOf.Add(-retention.DefaultConsentRetention - 30*retention.Day)
	a := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf})
	b := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf})
	c := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf})
	// a: three old transitions and one recent; b: one old, their latest.
	var moves []fixture.LoggedMove
	for _, r := range []struct {
		user string
		at   time.Time
	}{{a, old}, {a, old.Add(time.Hour)}, {a, old.Add(2 * time.Hour)}, {a, asOf.Add(-time.Hour)}, {b, old}} {
		moves = append(moves, fixture.LoggedMove{User: r.user, From: "active", To: "goodbye_sent", Trigger: "inactivity_14d", At: r.at})
	}
	fixture.LogMoves(t, pool, moves)
	// a: out and in long ago, out recently; b: out long ago, their latest.
	var events []fixture.RetentionConsent
	for _, r := range []struct {
		user string
		out  bool
		at   time.Time
	}{{a, true, old}, {a, false, old.Add(time.Hour)}, {a, true, asOf.Add(-time.Hour)}, {b, true, old}} {
		events = append(events, fixture.RetentionConsent{User: r.user, OptedOut: r.out, Source: "bot:keyword", At: r.at, Recorded: r.at})
	}
	// c (issue 56): out long ago, their latest change, then a resume said
	// before it, recorded after it as superseded: neither goes, the
	// standing choice is the opt-out.
	events = append(events,
		fixture.RetentionConsent{User: c, OptedOut: true, Source: "bot:keyword", At: old, Recorded: old},
		fixture.RetentionConsent{User: c, OptedOut: false, Source: "meta:user_preferences", At: old.Add(-time.Hour),
			Recorded: old.Add(time.Hour), Superseded: true})
	fixture.RetentionConsentEvents(t, pool, events...)
	cfg := retention.CleanupConfig{OlderThan: retention.DefaultRetention, AsOf: asOf, BatchSize: 1,
		TransitionsOlderThan: retention.DefaultTransitionRetention, ConsentOlderThan: retention.DefaultConsentRetention}

	keep := cfg
	keep.TransitionsOlderThan, keep.ConsentOlderThan = 0, 0
	if sum, err := retention.Cleanup(ctx, pool, keep); err != nil || sum.Transitions != 0 || sum.ConsentEvents != 0 ||
		sum.TransitionsCutoff != nil || sum.ConsentCutoff != nil {
		t.Fatalf("horizons 0: %+v, %v; want nothing deleted", sum, err)
	}
	dry := cfg
	dry.DryRun = true
	sum, err := retention.Cleanup(ctx, pool, dry)
	if err != nil || sum.Transitions != 3 || sum.ConsentEvents != 2 {
		t.Fatalf("dry run: %+v, %v; want 3 transitions and 2 consent events", sum, err)
	}
	sum, err = retention.Cleanup(ctx, pool, cfg)
	if err != nil || sum.Transitions != 3 || sum.ConsentEvents != 2 ||
		!sum.TransitionsCutoff.Equal(asOf.Add(-retention.DefaultTransitionRetention)) {
		t.Fatalf("cleanup: %+v, %v; want 3 transitions and 2 consent events deleted", sum, err)
	}
	dayAgo := fixture.Now(t, pool).Add(-24 * time.Hour)
	recentMoves := fixture.CountWhere(fixture.LogRows(t, pool, fixture.Logged{Users: []string{a}}),
		func(r fixture.LogRow) bool { return r.CreatedAt.After(dayAgo) })
	recentOut := fixture.CountWhere(fixture.ConsentEventsOf(t, pool, a),
		func(e fixture.ConsentRow) bool { return e.OptedOut && e.At.After(dayAgo) })
	outOfB := fixture.CountWhere(fixture.ConsentEventsOf(t, pool, b), func(e fixture.ConsentRow) bool { return e.OptedOut })
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"a's transitions of the last day", recentMoves, 1},
		{"b's transitions", fixture.CountTransitions(t, pool, fixture.Moves{Users: []string{b}}), 1},
		{"transitions", fixture.CountTransitions(t, pool, fixture.Moves{}), 2},
		{"a's opt-outs of the last day", recentOut, 1},
		{"b's opt-outs", outOfB, 1},
		{"c's consent events", len(fixture.ConsentEventsOf(t, pool, c)), 2},
		{"consent events", fixture.RetentionConsentCount(t, pool), 4},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
}
