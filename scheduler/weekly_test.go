package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// weekAsOf is a Thursday in ISO week 2026-W48.
var weekAsOf = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

func runWeekly(t *testing.T, pool *pgxpool.Pool, asOf time.Time) *scheduler.Summary {
	t.Helper()
	sum, err := scheduler.RunWeekly(context.Background(), pool, scheduler.Config{AsOf: asOf, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("RunWeekly: %v", err)
	}
	return sum
}

// reviews returns the user's weekly reviews' idempotency keys and counts.
func reviews(t *testing.T, pool *pgxpool.Pool, user string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range fixture.MessagesOf(t, pool, user) {
		if m.Type != "weekly_review" {
			t.Errorf("user %s has a %s message, want only reviews", user, m.Type)
			continue
		}
		out[*m.IdempotencyKey] = m.Params["count"]
	}
	return out
}

// states is every user's state row, as one string to compare.
func states(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var b strings.Builder
	for _, u := range fixture.StateRows(t, pool) {
		fmt.Fprintf(&b, "%s/%s/%s/%s,", u.UserID, u.State, u.LastActivityAt.UTC().Format(time.RFC3339Nano), u.UpdatedAt.UTC().Format(time.RFC3339Nano))
	}
	return b.String()
}

func TestWeeklyScenarios(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ago := func(d time.Duration) time.Time { return weekAsOf.Add(-d) }
	user := func(state string, lastActivity time.Time, o ...func(*fixture.UserOptions)) string {
		opts := fixture.UserOptions{State: state, LastActivity: lastActivity}
		for _, f := range o {
			f(&opts)
		}
		return fixture.User(t, pool, opts)
	}
	optedOut := func(o *fixture.UserOptions) { o.OptedOut = true }

	threeTx := user("active", ago(20*day))
	fixture.Transactions(t, pool, threeTx, ago(day), ago(2*day), ago(6*day))
	botOnly := user("active", ago(3*day))
	quiet := user("active", ago(10*day))
	fixture.Transactions(t, pool, quiet, ago(8*day), ago(30*day))
	dormant := user("dormant", ago(90*day))
	fixture.Transactions(t, pool, dormant, ago(day))
	optOut := user("active", ago(day), optedOut)
	fixture.Transactions(t, pool, optOut, ago(day))
	goodbyeSent := user("goodbye_sent", ago(20*day))
	fixture.Transactions(t, pool, goodbyeSent, ago(day))
	remindLater := user("remind_later", ago(20*day))
	fixture.Transactions(t, pool, remindLater, ago(day))
	helpFlow := user("help_flow", ago(2*day))
	oldAndNew := user("active", ago(20*day))
	fixture.Transactions(t, pool, oldAndNew, ago(day), ago(3*day), ago(8*day), ago(40*day))
	edges := user("active", ago(20*day))
	// The window is (as-of − 7 days, as-of]: the first instant is out, the last in.
	fixture.Transactions(t, pool, edges, ago(7*day), weekAsOf, weekAsOf.Add(time.Second))
	botEdge := user("active", ago(7*day))
	noJID := user("active", ago(day), func(o *fixture.UserOptions) { o.WhatsAppJID = fixture.NoJID })
	toGroup := user("active", ago(day), func(o *fixture.UserOptions) {
		o.Destination, o.GroupJID = "group", fixture.Ptr("120363000000000009@g.us")
	})

	statesBefore := states(t, pool)
	sum := runWeekly(t, pool, weekAsOf)

	key := func(u string) string { return u + ":weekly_review:2026-W48" }
	tests := []struct {
		name string
		user string
		want map[string]string
	}{
		{"3 transactions this week: count 3", threeTx, map[string]string{key(threeTx): "3"}},
		{"bot activity only: count 0", botOnly, map[string]string{key(botOnly): "0"}},
		{"no activity in the window: nothing", quiet, map[string]string{}},
		{"dormant: nothing", dormant, map[string]string{}},
		{"opted out: nothing", optOut, map[string]string{}},
		{"goodbye_sent with transactions: nothing", goodbyeSent, map[string]string{}},
		{"remind_later with transactions: nothing", remindLater, map[string]string{}},
		{"help_flow with activity: review", helpFlow, map[string]string{key(helpFlow): "0"}},
		{"transactions older than 7 days are not counted", oldAndNew, map[string]string{key(oldAndNew): "2"}},
		{"window edges: as-of − 7 d out, as-of in, after as-of out", edges, map[string]string{key(edges): "1"}},
		{"bot activity exactly 7 days ago: out of the window", botEdge, map[string]string{}},
		{"no destination: nothing", noJID, map[string]string{}},
		{"group destination: review", toGroup, map[string]string{key(toGroup): "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reviews(t, pool, tt.user)
			if len(got) != len(tt.want) {
				t.Fatalf("reviews = %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("review %s count = %q, want %q", k, got[k], v)
				}
			}
		})
	}
	if msgs := fixture.MessagesOf(t, pool, toGroup); len(msgs) != 1 || msgs[0].Destination != "group" || msgs[0].DestinationJID != "120363000000000009@g.us" {
		t.Errorf("group user's review = %+v, want it routed to the group", msgs)
	}
	if m := fixture.MessagesOf(t, pool, threeTx); len(m) != 1 || m[0].Key == nil || *m[0].Key != "engagement.weekly_review.celebration" || m[0].Status != "pending" {
		t.Errorf("review = %+v, want a pending engagement.weekly_review.celebration", m)
	}
	if after := states(t, pool); after != statesBefore {
		t.Errorf("the weekly job changed states: before %s, after %s", statesBefore, after)
	}
	if n := fixture.CountTransitions(t, pool, fixture.Moves{}); n != 0 {
		t.Errorf("%d transitions logged, want none", n)
	}

	want := scheduler.Counts{Processed: 6, Succeeded: 6, Skipped: 2, Queued: 6}
	if sum.Processed != want.Processed || sum.Succeeded != want.Succeeded || sum.Skipped != want.Skipped || sum.Queued != want.Queued || sum.Duplicates != 0 || sum.Failed != 0 {
		t.Errorf("summary %+v, want %+v", sum.Counts, want)
	}
	if sum.SkipReasons[sm.SkipOptedOut] != 1 || sum.SkipReasons[sm.SkipNoDestination] != 1 {
		t.Errorf("skip reasons %v, want one opted out and one without destination", sum.SkipReasons)
	}
	if sum.ISOWeek != "2026-W48" || sum.Job != "engagement-weekly" {
		t.Errorf("summary job %q iso_week %q, want engagement-weekly 2026-W48", sum.Job, sum.ISOWeek)
	}
}

func TestWeeklyRerunSameWeekQueuesNothingAndNextWeekQueuesAgain(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	var users []string
	for range 12 {
		u := fixture.User(t, pool, fixture.UserOptions{LastActivity: weekAsOf.Add(-day)})
		fixture.Transactions(t, pool, u, weekAsOf.Add(-2*day))
		users = append(users, u)
	}

	first := runWeekly(t, pool, weekAsOf)
	if first.Queued != 12 {
		t.Fatalf("first run queued %d, want 12", first.Queued)
	}
	// Sunday night is still 2026-W48.
	again := runWeekly(t, pool, time.Date(2026, 11, 29, 23, 59, 59, 0, time.UTC))
	if again.Queued != 0 || again.Duplicates != 12 || again.Failed != 0 {
		t.Errorf("same-week re-run queued %d duplicates %d, want 0 and 12", again.Queued, again.Duplicates)
	}
	if m := again.Messages["weekly_review"]; m == nil || m.Queued != 0 || m.Duplicates != 12 {
		t.Errorf("per-type counters %+v, want weekly_review queued 0, duplicates 12", again.Messages)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{}); n != 12 {
		t.Errorf("%d reviews after the re-run, want one per user (12)", n)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{RunID: first.RunID}); n != 12 {
		t.Errorf("%d reviews carry the first run's id, want the 12 it queued", n)
	}
	next := runWeekly(t, pool, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) // Monday: 2026-W49
	if next.Queued != 12 || next.Duplicates != 0 || next.ISOWeek != "2026-W49" {
		t.Errorf("next week: queued %d duplicates %d week %s, want 12, 0, 2026-W49", next.Queued, next.Duplicates, next.ISOWeek)
	}
	for _, u := range users {
		got := reviews(t, pool, u)
		if len(got) != 2 || got[u+":weekly_review:2026-W48"] != "1" || got[u+":weekly_review:2026-W49"] != "1" {
			t.Errorf("user %s reviews %v, want one for W48 and one for W49, count 1 each", u, got)
		}
	}
}

func TestWeeklyISOWeekYearBoundaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		asOf time.Time
		week string
	}{
		{time.Date(2027, 1, 1, 9, 0, 0, 0, time.UTC), "2026-W53"},
		{time.Date(2025, 12, 29, 9, 0, 0, 0, time.UTC), "2026-W01"},
		{time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), "2026-W53"},
		{time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC), "2027-W01"},
		// 23:30 in São Paulo on Sunday 2026-11-29 is Monday in UTC: the UTC week counts.
		{time.Date(2026, 11, 29, 23, 30, 0, 0, time.FixedZone("BRT", -3*3600)), "2026-W49"},
	}
	for _, tt := range tests {
		t.Run(tt.week, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			u := fixture.User(t, pool, fixture.UserOptions{LastActivity: tt.asOf.Add(-time.Hour)})
			sum := runWeekly(t, pool, tt.asOf)
			if sum.ISOWeek != tt.week {
				t.Errorf("iso_week = %s, want %s", sum.ISOWeek, tt.week)
			}
			if got := reviews(t, pool, u); len(got) != 1 || got[u+":weekly_review:"+tt.week] != "0" {
				t.Errorf("reviews %v, want one keyed %s", got, tt.week)
			}
			// The week it covers is stored, not left to the key: Monday
			// to Monday, UTC, and cleanup keeps it until that Monday.
			msgs := fixture.MessageRows(t, pool, fixture.Messages{Users: []string{u}})
			if len(msgs) != 1 || msgs[0].PeriodStart == nil || msgs[0].ReplayUntil == nil {
				t.Fatalf("messages %+v, want one with its period", msgs)
			}
			start := msgs[0].PeriodStart.UTC()
			year, isoWeek := start.ISOWeek()
			week := fmt.Sprintf("%d-W%02d %s", year, isoWeek, start.Format("Mon 15:04"))
			days := msgs[0].ReplayUntil.Sub(start).Hours() / 24
			if want := tt.week + " Mon 00:00"; week != want || days != 7 {
				t.Errorf("period_start %s, replay_until %v days later; want %s and 7", week, days, want)
			}
		})
	}
}

func TestWeeklyConcurrentRunsQueueOneReviewEach(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	const users = 2000
	fixture.InactiveUsers(t, pool, users, weekAsOf.Add(-day)) // active yesterday
	var wg sync.WaitGroup
	sums := make([]*scheduler.Summary, 3)
	errs := make([]error, 3)
	for i := range sums {
		wg.Go(func() {
			sums[i], errs[i] = scheduler.RunWeekly(context.Background(), pool, scheduler.Config{AsOf: weekAsOf, BatchSize: 300, Logger: zerolog.Nop()})
		})
	}
	wg.Wait()
	queued, dups := 0, 0
	for i := range sums {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		queued += sums[i].Queued
		dups += sums[i].Duplicates
	}
	if queued != users || dups != 2*users {
		t.Errorf("runs queued %d with %d duplicates, want %d and %d", queued, dups, users, 2*users)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{}); n != users {
		t.Errorf("%d reviews, want one per user (%d)", n, users)
	}
}

func TestWeeklyFailingUserFailsAloneAndDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 30, weekAsOf.Add(-day))
	bad := fixture.User(t, pool, fixture.UserOptions{LastActivity: weekAsOf.Add(-day)})
	fixture.Refuse(t, pool, "engagement_message_queue", bad)

	dry, err := scheduler.RunWeekly(context.Background(), pool, scheduler.Config{AsOf: weekAsOf, DryRun: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{}) + fixture.CountRuns(t, pool, fixture.Runs{}); n != 0 {
		t.Fatalf("the dry run wrote %d rows", n)
	}
	if dry.Processed != 31 || dry.Queued != 31 {
		t.Errorf("dry run %+v, want 31 processed and queued", dry.Counts)
	}

	sum := runWeekly(t, pool, weekAsOf)
	if sum.Failed != 1 || sum.Queued != 30 || sum.Processed != 31 || len(sum.Errors) != 1 || sum.Errors[0].UserID != bad {
		t.Errorf("summary %+v errors %+v, want the bad user failed alone and 30 queued", sum.Counts, sum.Errors)
	}
	if len(fixture.MessagesOf(t, pool, bad)) != 0 {
		t.Error("the failing user has a review")
	}
}
