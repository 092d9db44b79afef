package verify_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/seeded"
	"github.com/engagement-scheduler/engagement/repair"
	"github.com/engagement-scheduler/engagement/verify"
)

// Issue 17, point 4: a goodbye cancelled instead of sent (the user opted
// out, or an operator cancelled it) was queued: goodbye_queued holds. A
// cancelled goodbye does not count towards one_goodbye_per_day, so one
// that replaced it the same day is no violation; requeueing the cancelled
// one next to it is.
func TestVerifyWithCancelledGoodbyes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _, _ := seeded.Pool(t)
	pick := movedToGoodbyeSent
	pick.Max = 2
	users := fixture.Users(t, pool, pick)
	if len(users) != 2 {
		t.Fatalf("users moved to goodbye_sent: %v, want 2", users)
	}
	// One cancelled by the operator, one at send time because the user opted out.
	if n, err := repair.Cancel(ctx, pool, repair.CancelFilter{UserID: users[0], Type: "goodbye"}, false); err != nil || n != 1 {
		t.Fatalf("cancel: %d, %v", n, err)
	}
	fixture.SetProfile(t, pool, users[1], fixture.ProfileChange{OptedOut: fixture.Ptr(true)})
	fixture.SetMessages(t, pool, fixture.MessageChange{User: users[1], Type: "goodbye",
		SetStatus: "cancelled", CancelReason: fixture.Ptr("opted_out")})

	rep := check(t, pool, seeded.AsOf.Add(time.Hour))
	if !rep.OK {
		t.Fatalf("verify with cancelled goodbyes: broken %v: %+v", rep.Broken, rep.Checks)
	}

	// An operator's replacement goodbye the same day, under another key.
	fixture.CopyMessages(t, pool, fixture.Copy{User: users[0], Type: "goodbye", Key: fixture.Ptr("ops-resend:goodbye_sent:2026-03-02")})
	if rep := check(t, pool, seeded.AsOf.Add(time.Hour)); !rep.OK {
		t.Fatalf("a cancelled goodbye and its replacement the same day: broken %v", rep.Broken)
	}
	if n, err := repair.Requeue(ctx, pool, repair.RequeueFilter{Status: "cancelled", Reason: "operator"}, false); err != nil || n != 1 {
		t.Fatalf("requeue: %d, %v", n, err)
	}
	rep = check(t, pool, seeded.AsOf.Add(time.Hour))
	if c := checkOf(t, rep, verify.CheckOneGoodbyePerDay); c.OK || c.Violations != 1 || !slices.Equal(rep.Broken, []string{verify.CheckOneGoodbyePerDay}) {
		t.Errorf("two live goodbyes for one day after the requeue: broken %v, %+v; want one_goodbye_per_day alone", rep.Broken, c)
	}
}
