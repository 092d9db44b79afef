package verify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/verify"
)

// Issue 45: after a daily run holding out half of 40 users, every check
// holds (goodbye_queued does not ask the held-out users for a goodbye);
// a goodbye of the run's day queued for a held-out user afterwards (a bug,
// or a hand) breaks no_goodbye_to_holdout, naming the user, and only while
// it is not cancelled.
func TestVerifyNoGoodbyeToHoldout(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	asOf := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	fixture.InactiveUsers(t, pool, 40, asOf.Add(-20*24*time.Hour))
	sum, err := scheduler.RunDaily(ctx, pool, scheduler.Config{AsOf: asOf, Holdout: scheduler.Holdout{Percent: 50}, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if sum.HeldOut == 0 || sum.HeldOut == 40 {
		t.Fatalf("held out %d of 40 at 50 %%, want some", sum.HeldOut)
	}
	if rep := check(t, pool, asOf.Add(time.Hour)); !rep.OK {
		t.Fatalf("after the run: broken %v, report %+v", rep.Broken, rep.Checks)
	}

	var user string
	if err := pool.QueryRow(ctx, `SELECT user_id::text FROM engagement_state_transitions WHERE holdout ORDER BY user_id LIMIT 1`).
		Scan(&user); err != nil {
		t.Fatal(err)
	}
	fixture.Exec(t, pool, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		       destination_jid, scheduled_for, idempotency_key, period_start, status, sent_at)
		VALUES ($1::uuid, 'goodbye', 'engagement.goodbye.self_select', '{}', 'individual', '5511900000001@s.whatsapp.net',
		        $2, $1::text || ':goodbye_sent:2026-11-22', $3, 'sent', $2)`, user, asOf, asOf.Truncate(24*time.Hour))
	c := checkOf(t, check(t, pool, asOf.Add(time.Hour)), verify.CheckNoGoodbyeToHoldout)
	if c.OK || c.Violations != 1 || len(c.Examples) != 1 || !strings.HasPrefix(c.Examples[0], user+" held out on 2026-11-22") {
		t.Errorf("a sent goodbye to a held-out user: %+v, want one violation naming %s", c, user)
	}
	fixture.Exec(t, pool, `UPDATE engagement_message_queue SET status = 'cancelled' WHERE user_id = $1`, user)
	if c := checkOf(t, check(t, pool, asOf.Add(time.Hour)), verify.CheckNoGoodbyeToHoldout); !c.OK {
		t.Errorf("the goodbye cancelled: %+v, want ok", c)
	}
}
