package scheduler_test

import (
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// TestWeeklyRerunCountsEarlierReviewsOfNowSkippedUsersAsDuplicates: a user
// reviewed earlier in the week who has since opted out or lost every JID
// counts as a duplicate in a same-week re-run, not as skipped, and the
// review is left as it was; users who were skipped the first time stay
// skipped. (The statement looks for an earlier review only when the
// profile would skip the user; this pins what that must still count.)
func TestWeeklyRerunCountsEarlierReviewsOfNowSkippedUsersAsDuplicates(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	active := func(o fixture.UserOptions) string {
		o.LastActivity = weekAsOf.Add(-day)
		u := fixture.User(t, pool, o)
		fixture.Transactions(t, pool, u, weekAsOf.Add(-2*day), weekAsOf.Add(-3*day))
		return u
	}
	reviewed := active(fixture.UserOptions{})
	willOptOut := active(fixture.UserOptions{})
	willLoseJID := active(fixture.UserOptions{})
	optedOut := active(fixture.UserOptions{OptedOut: true})
	noJID := active(fixture.UserOptions{WhatsAppJID: fixture.NoJID})

	first := runWeekly(t, pool, weekAsOf)
	if first.Queued != 3 || first.Skipped != 2 {
		t.Fatalf("first run queued %d skipped %d, want 3 and 2", first.Queued, first.Skipped)
	}
	fixture.SetProfile(t, pool, willOptOut, fixture.ProfileChange{OptedOut: fixture.Ptr(true)})
	fixture.SetProfile(t, pool, willLoseJID, fixture.ProfileChange{NoJIDs: true})

	again := runWeekly(t, pool, weekAsOf.Add(day))
	if again.Queued != 0 || again.Duplicates != 3 || again.Succeeded != 3 || again.Failed != 0 {
		t.Errorf("re-run queued %d duplicates %d succeeded %d failed %d, want 0, 3, 3, 0: an earlier review is a duplicate even when the user is now skipped",
			again.Queued, again.Duplicates, again.Succeeded, again.Failed)
	}
	if again.Skipped != 2 || again.SkipReasons[sm.SkipOptedOut] != 1 || again.SkipReasons[sm.SkipNoDestination] != 1 {
		t.Errorf("re-run skipped %d (%v), want the 2 never reviewed: one opted out, one without destination", again.Skipped, again.SkipReasons)
	}
	for _, u := range []string{reviewed, willOptOut, willLoseJID} {
		if got := reviews(t, pool, u); len(got) != 1 || got[u+":weekly_review:2026-W48"] != "2" {
			t.Errorf("user %s reviews %v, want the first run's one, count 2", u, got)
		}
	}
	for _, u := range []string{optedOut, noJID} {
		if got := reviews(t, pool, u); len(got) != 0 {
			t.Errorf("skipped user %s has reviews %v, want none", u, got)
		}
	}
}

// TestWeeklyFirstRunFindsReviewsQueuedForLaterUsersOfTheChunk: the
// statement guesses from a chunk's first users whether an earlier run of
// the week reviewed it; here they were not reviewed and later users were
// (a run killed half-way through the chunk, or reviews queued by hand), so
// it takes the first run's way, and still every earlier review is a
// duplicate, an opted-out user's too, and everyone else gets one.
func TestWeeklyFirstRunFindsReviewsQueuedForLaterUsersOfTheChunk(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	active := func(o fixture.UserOptions) string {
		o.LastActivity = weekAsOf.Add(-day)
		u := fixture.User(t, pool, o)
		fixture.Transactions(t, pool, u, weekAsOf.Add(-2*day))
		return u
	}
	var fresh, earlier []string
	for range 10 { // first in the table: no review yet
		fresh = append(fresh, active(fixture.UserOptions{}))
	}
	for range 3 {
		earlier = append(earlier, active(fixture.UserOptions{}))
	}
	earlier = append(earlier, active(fixture.UserOptions{OptedOut: true}))
	for _, u := range earlier {
		fixture.Queue(t, pool, fixture.Message{User: u, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
			Params: `{"count":"7"}`, JID: "queued-before@s.whatsapp.net", ScheduledFor: weekAsOf, Key: u + ":weekly_review:2026-W48"})
	}

	sum := runWeekly(t, pool, weekAsOf)
	if sum.Queued != 10 || sum.Duplicates != 4 || sum.Succeeded != 14 || sum.Skipped != 0 || sum.Failed != 0 {
		t.Errorf("run queued %d duplicates %d succeeded %d skipped %d (%v) failed %d, want 10, 4, 14, 0, 0",
			sum.Queued, sum.Duplicates, sum.Succeeded, sum.Skipped, sum.SkipReasons, sum.Failed)
	}
	for _, u := range fresh {
		if got := reviews(t, pool, u); len(got) != 1 || got[u+":weekly_review:2026-W48"] != "1" {
			t.Errorf("user %s reviews %v, want one of count 1", u, got)
		}
	}
	for _, u := range earlier {
		if got := reviews(t, pool, u); len(got) != 1 || got[u+":weekly_review:2026-W48"] != "7" {
			t.Errorf("user %s reviews %v, want only the earlier one (count 7), untouched", u, got)
		}
	}
}
