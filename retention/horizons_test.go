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
	for _, r := range []struct {
		user string
		at   time.Time
	}{{a, old}, {a, old.Add(time.Hour)}, {a, old.Add(2 * time.Hour)}, {a, asOf.Add(-time.Hour)}, {b, old}} {
		fixture.Exec(t, pool, `INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger, created_at)
		                       VALUES ($1, 'active', 'goodbye_sent', 'inactivity_14d', $2)`, r.user, r.at)
	}
	// a: out and in long ago, out recently; b: out long ago, their latest.
	for _, r := range []struct {
		user string
		out  bool
		at   time.Time
	}{{a, true, old}, {a, false, old.Add(time.Hour)}, {a, true, asOf.Add(-time.Hour)}, {b, true, old}} {
		fixture.Exec(t, pool, `INSERT INTO engagement_consent_events (user_id, opted_out, source, at, created_at)
		                       VALUES ($1, $2, 'bot:keyword', $3, $3)`, r.user, r.out, r.at)
	}
	// c (issue 56): out long ago, their latest change, then a resume said
	// before it, recorded after it as superseded: neither goes, the
	// standing choice is the opt-out.
	fixture.Exec(t, pool, `INSERT INTO engagement_consent_events (user_id, opted_out, source, at, created_at, superseded)
	                       VALUES ($1, true, 'bot:keyword', $2, $2, false), ($1, false, 'meta:user_preferences', $2 - interval '1 hour', $2 + interval '1 hour', true)`,
		c, old)
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
	for _, c := range []struct {
		sql  string
		want int
	}{
		{`SELECT count(*) FROM engagement_state_transitions WHERE user_id = '` + a + `' AND created_at > now() - interval '1 day'`, 1},
		{`SELECT count(*) FROM engagement_state_transitions WHERE user_id = '` + b + `'`, 1},
		{`SELECT count(*) FROM engagement_state_transitions`, 2},
		{`SELECT count(*) FROM engagement_consent_events WHERE user_id = '` + a + `' AND opted_out AND at > now() - interval '1 day'`, 1},
		{`SELECT count(*) FROM engagement_consent_events WHERE user_id = '` + b + `' AND opted_out`, 1},
		{`SELECT count(*) FROM engagement_consent_events WHERE user_id = '` + c + `'`, 2},
		{`SELECT count(*) FROM engagement_consent_events`, 4},
	} {
		if got := fixture.Count(t, pool, c.sql); got != c.want {
			t.Errorf("%s: %d, want %d", c.sql, got, c.want)
		}
	}
}
