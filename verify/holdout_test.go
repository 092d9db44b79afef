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

	user := fixture.FirstUser(t, pool, fixture.Pick{Holdout: true})
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.self_select",
		JID: "5511900000001@s.whatsapp.net", ScheduledFor: asOf, Key: user + ":goodbye_sent:2026-11-22",
		PeriodStart: asOf.Truncate(24 * time.Hour), Status: "sent", SentAt: asOf})
	c := checkOf(t, check(t, pool, asOf.Add(time.Hour)), verify.CheckNoGoodbyeToHoldout)
	if c.OK || c.Violations != 1 || len(c.Examples) != 1 || !strings.HasPrefix(c.Examples[0], user+" held out on 2026-11-22") {
		t.Errorf("a sent goodbye to a held-out user: %+v, want one violation naming %s", c, user)
	}
	fixture.SetMessages(t, pool, fixture.MessageChange{User: user, SetStatus: "cancelled"})
	if c := checkOf(t, check(t, pool, asOf.Add(time.Hour)), verify.CheckNoGoodbyeToHoldout); !c.OK {
		t.Errorf("the goodbye cancelled: %+v, want ok", c)
	}
}
