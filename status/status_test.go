package status_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/seeded"
	"github.com/engagement-scheduler/engagement/pricing"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/status"
)

func TestStatusOnSeededData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, daily, weekly := seeded.Pool(t)
	// Some traffic for the queue: one goodbye sent, one review failed,
	// one claim past its deadline.
	first := func(m fixture.Messages) string {
		t.Helper()
		ids := fixture.MessageIDs(t, pool, m, 1)
		if len(ids) == 0 {
			t.Fatalf("no message is %+v", m)
		}
		return ids[0]
	}
	fixture.SetMessages(t, pool, fixture.MessageChange{ID: first(fixture.Messages{Type: "goodbye"}), SetStatus: "sent", SentAt: seeded.AsOf})
	fixture.SetMessages(t, pool, fixture.MessageChange{ID: first(fixture.Messages{Type: "weekly_review"}), SetStatus: "failed",
		Error: fixture.Ptr("x")})
	fixture.SetMessages(t, pool, fixture.MessageChange{ID: first(fixture.Messages{Status: "pending"}), SetStatus: "processing",
		ClaimedUntil: seeded.AsOf})

	at := seeded.AsOf.Add(2 * time.Hour)
	st, err := status.Read(ctx, pool, at, 0)
	if err != nil {
		t.Fatalf("ReadStatus: %v", err)
	}
	if !st.AsOf.Equal(at) || st.RunsPerJob != status.DefaultRuns {
		t.Errorf("as of %s, %d runs per job; want %s, %d", st.AsOf, st.RunsPerJob, at, status.DefaultRuns)
	}

	// The queue, against direct counts.
	got := map[[2]string]int64{}
	for _, c := range st.Queue.Counts {
		got[[2]string{c.Status, c.MessageType}] = c.Messages
	}
	for _, status := range sm.MessageStatuses() {
		for _, typ := range []string{"goodbye", "weekly_review"} {
			want := fixture.CountMessages(t, pool, fixture.Messages{Type: typ, Status: status})
			if got[[2]string{status, typ}] != int64(want) {
				t.Errorf("queue %s %s: %d, want %d", status, typ, got[[2]string{status, typ}], want)
			}
		}
	}
	if len(got) != 5 { // pending and sent goodbyes; pending and failed reviews; one processing
		t.Errorf("queue counts %+v, want 5 (status, type) pairs", st.Queue.Counts)
	}
	total := fixture.CountMessages(t, pool, fixture.Messages{})
	if st.Queue.Total != int64(total) || int64(daily.Queued+weekly.Queued) != st.Queue.Total {
		t.Errorf("queue total %d, want %d (= %d goodbyes + %d reviews queued)", st.Queue.Total, total, daily.Queued, weekly.Queued)
	}
	due := fixture.StatusDuePending(t, pool, at)
	if st.Queue.DuePending != int64(due) || due == 0 {
		t.Errorf("due pending %d, want %d (more than 0)", st.Queue.DuePending, due)
	}
	// The jobs queue at least(as-of, now()): as-of here, 2 h before at.
	if st.Queue.OldestDuePendingAt == nil || !st.Queue.OldestDuePendingAt.Equal(seeded.AsOf) ||
		*st.Queue.OldestDuePendingAgeSeconds != 7200 {
		t.Errorf("oldest due pending at %v, age %v s; want %s, 7200 s", st.Queue.OldestDuePendingAt, st.Queue.OldestDuePendingAgeSeconds, seeded.AsOf)
	}
	if st.Queue.ExpiredClaims != 1 {
		t.Errorf("expired claims %d, want 1", st.Queue.ExpiredClaims)
	}

	// The users, against direct counts, every state listed.
	if len(st.Users.ByState) != 5 {
		t.Errorf("users by state %+v, want the 5 states", st.Users.ByState)
	}
	for _, s := range st.Users.ByState {
		users := fixture.CountStates(t, pool, fixture.States{State: s.State})
		optedOut := fixture.StatusOptedOut(t, pool, s.State)
		if s.Users != int64(users) || s.OptedOut != int64(optedOut) {
			t.Errorf("state %s: %d users, %d opted out; want %d, %d", s.State, s.Users, s.OptedOut, users, optedOut)
		}
	}
	if st.Users.Total != 2000 || st.Users.OptedOut == 0 {
		t.Errorf("users %d (%d opted out), want 2000 with some opted out", st.Users.Total, st.Users.OptedOut)
	}

	// The runs: one of each job, with the counters its summary reported.
	if len(st.Runs) != 2 {
		t.Fatalf("runs %+v, want the daily and the weekly run", st.Runs)
	}
	for i, sum := range []*scheduler.Summary{daily, weekly} {
		r := st.Runs[i]
		if r.ID != sum.RunID || r.Job != sum.Job || r.Status != scheduler.RunSucceeded || !r.AsOf.Equal(seeded.AsOf) ||
			r.FinishedAt == nil || r.Counters == nil || r.Shard != "" {
			t.Fatalf("run %d: %+v, want %s's run %d, succeeded as of %s, finished, with counters", i, r, sum.Job, sum.RunID, seeded.AsOf)
		}
		c := *r.Counters
		if c.Processed != sum.Processed || c.Succeeded != sum.Succeeded || c.Failed != sum.Failed ||
			c.Skipped != sum.Skipped || c.Queued != sum.Queued || c.Duplicates != sum.Duplicates {
			t.Errorf("run %d counters %+v, want the summary's %+v", r.ID, c, sum.Counts)
		}
	}

	// --runs bounds the history per job; a running run has no counters.
	for range 3 {
		if _, err := scheduler.RunWeekly(ctx, pool, scheduler.Config{AsOf: seeded.AsOf}); err != nil {
			t.Fatal(err)
		}
	}
	fixture.RunningRun(t, pool, "engagement-daily", "1/2")
	st, err = status.Read(ctx, pool, at, 2)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, r := range st.Runs {
		jobs = append(jobs, r.Job+"/"+r.Shard+"/"+r.Status)
	}
	want := []string{"engagement-daily//succeeded", "engagement-daily/1/2/running", "engagement-weekly//succeeded", "engagement-weekly//succeeded"}
	if len(jobs) != len(want) {
		t.Fatalf("runs %v, want %v", jobs, want)
	}
	for i := range want {
		if jobs[i] != want[i] {
			t.Fatalf("runs %v, want %v", jobs, want)
		}
	}
	if st.Runs[1].Counters != nil || st.Runs[1].FinishedAt != nil || st.Runs[2].ID <= st.Runs[3].ID {
		t.Errorf("runs %+v: want the running one without counters, newest first", st.Runs)
	}
}

// The spend of the last 30 days and the next 7 days' goodbyes, in the
// report engagementctl status --output json prints.
func TestStatusSpend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewPool(t)
	asOf := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-40 * 24 * time.Hour)})
	fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-10 * 24 * time.Hour)}) // 14 days silent in 4 days
	// Both sent through the Cloud API (the send ledger says so) and
	// delivered; Meta priced the review as utility.
	sent, jid := asOf.Add(-24*time.Hour), "5511999990000@s.whatsapp.net"
	fixture.PricingSends(t, pool, user, sent,
		fixture.PricingSend{ID: fixture.NewID(), Type: "weekly_review", JID: jid, Status: "sent", SentAt: sent, ProviderID: "wamid." + user + "1",
			Billable: fixture.Ptr(true), Category: fixture.Ptr("utility"), Transport: pricing.MetaTransport},
		fixture.PricingSend{ID: fixture.NewID(), Type: "goodbye", JID: jid, Status: "sent", SentAt: sent, ProviderID: "wamid." + user + "2",
			Transport: pricing.MetaTransport})
	for _, n := range []string{"1", "2"} {
		if _, _, err := activity.Receipt(ctx, pool, "wamid."+user+n, activity.ReceiptDelivered,
			activity.ReceiptOptions{At: asOf.Add(-23 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := status.Read(ctx, pool, asOf, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Spend; s.Accepted != 2 || s.Billable != 2 || s.USD != 0.0693 || len(s.Categories) != 2 {
		t.Errorf("spend %+v; want 2 billed, a marketing goodbye and a utility review, US$0.0693", s)
	}
	f := st.SpendForecast
	if f.Days != 7 || f.Goodbyes != 2 || f.USD == nil || *f.USD != 0.125 {
		t.Errorf("forecast %+v; want 7 days, 2 goodbyes (the one overdue, the one due in 4 days), US$0.125", f)
	}
	b, _ := json.Marshal(st)
	for _, want := range []string{`"spend":{"window":"30 days"`, `"spend_forecast":{"days":7,"goodbyes":2,"usd":0.125,"assumption":`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the JSON lacks %s: %s", want, b)
		}
	}

	// A prices file's prices, through ReadWith.
	p := pricing.Default()
	p.Countries["BR"].Prices["marketing"] = 0.1
	if st, err = status.ReadWith(ctx, pool, status.Options{AsOf: asOf, Prices: p}); err != nil {
		t.Fatal(err)
	}
	if st.Spend.USD != 0.1068 || *st.SpendForecast.USD != 0.2 {
		t.Errorf("at 0.1 a marketing message: %v and %v, want 0.1068 and 0.2", st.Spend.USD, *st.SpendForecast.USD)
	}
}
