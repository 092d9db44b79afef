package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/pricing"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// The scripted history's clock: the console reads it as of historyAsOf, a
// Monday; cohort A's goodbyes go out on d1 (the week of 2026-02-09), cohort
// B's on d2 (the week of 2026-02-23), and one goodbye on dz, before the
// overview's 8 weeks (which start 2026-01-12).
var (
	historyAsOf = time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)
	d1          = time.Date(2026, 2, 10, 6, 0, 0, 0, time.UTC)
	d2          = d1.Add(14 * 24 * time.Hour)
	dz          = time.Date(2026, 1, 6, 6, 0, 0, 0, time.UTC)
	// longBefore is when the users were created: long before the
	// overview's weeks.
	longBefore = time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC)
)

// history replays a scripted history with the real daily job and the
// bot's engagement_fire, each step's log rows dated when the step
// happened (the log stamps its rows with the database's clock, which a
// test cannot turn back):
//
//	dz      z gets a goodbye (never delivered: outside the funnel's weeks)
//	d1      A: u1..u10 get goodbyes; u1..u9 delivered, u10's fails
//	d1+5h   u1, u2 answer help; u3 remind later; u4 not now; u5, u6 write
//	d1+2d   u1 (in the help flow) writes again
//	d1+3d   the daily job: u7, u8, u9 time out; u10's goodbye went back
//	d2      B: u11..u14 and u10 (silent still) get goodbyes, all delivered
//	d2+1h   u11 writes
//	d1+15d  u7 (dormant) writes
type history struct {
	pool *pgxpool.Pool
	u    map[string]string // name → user id
}

func newHistory(t *testing.T) *history {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	h := &history{pool: pool, u: map[string]string{}}
	h.user(t, "z", dz.Add(-15*24*time.Hour))
	for _, n := range []string{"u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9", "u10"} {
		h.user(t, n, d1.Add(-15*24*time.Hour))
	}
	for _, n := range []string{"u11", "u12", "u13", "u14"} {
		h.user(t, n, d2.Add(-15*24*time.Hour))
	}
	// They were all users long before the overview's weeks.
	fixture.ConsoleUsersSince(t, pool, longBefore)

	h.daily(t, dz)
	h.daily(t, d1)
	h.deliver(t, d1.Add(time.Hour), "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9")
	fixture.ConsoleFailMessages(t, pool, fixture.ConsoleFailure{User: h.u["u10"], Error: "webhook: receiver answered 500", RetryCount: 3})
	at := d1.Add(5 * time.Hour)
	h.fire(t, at, "u1", sm.GoodbyeAnswerHelp)
	h.fire(t, at, "u2", sm.GoodbyeAnswerHelp)
	h.fire(t, at, "u3", sm.GoodbyeAnswerRemindLater)
	h.fire(t, at, "u4", sm.GoodbyeAnswerDormant)
	h.fire(t, at, "u5", sm.UserMessage)
	h.fire(t, at, "u6", sm.UserMessage)
	h.fire(t, d1.Add(48*time.Hour), "u1", sm.UserMessage)
	h.daily(t, d1.Add(72*time.Hour))
	h.daily(t, d2)
	h.deliver(t, d2.Add(30*time.Minute), "u10", "u11", "u12", "u13", "u14")
	// WhatsApp's receipts for three of them: a delivery, a read (which
	// implies it), a failure after acceptance (Meta's per-user marketing
	// limit).
	h.receipt(t, "u12", activity.ReceiptDelivered, d2.Add(40*time.Minute), "")
	h.receipt(t, "u13", activity.ReceiptRead, d2.Add(50*time.Minute), "")
	h.receipt(t, "u14", activity.ReceiptFailed, d2.Add(time.Hour), "131049")
	h.fire(t, d2.Add(time.Hour), "u11", sm.UserMessage)
	h.fire(t, d1.Add(15*24*time.Hour), "u7", sm.UserMessage)
	return h
}

func (h *history) user(t *testing.T, name string, lastActivity time.Time) {
	h.u[name] = fixture.User(t, h.pool, fixture.UserOptions{LastActivity: lastActivity})
}

// stamp dates the log rows written since before (the largest id then) at.
func (h *history) stamp(t *testing.T, before int64, at time.Time) {
	fixture.ConsoleDateMoves(t, h.pool, before, at)
}

func (h *history) lastID(t *testing.T) int64 {
	_, move := fixture.ConsoleLastIDs(t, h.pool)
	return move
}

func (h *history) daily(t *testing.T, at time.Time) {
	t.Helper()
	before := h.lastID(t)
	if _, err := scheduler.RunDaily(context.Background(), h.pool, scheduler.Config{AsOf: at}); err != nil {
		t.Fatalf("daily as of %s: %v", at, err)
	}
	h.stamp(t, before, at)
}

// deliver sends the users' pending messages at at through the Cloud API,
// as queue-process records them: sent, and the send ledger's row.
func (h *history) deliver(t *testing.T, at time.Time, names ...string) {
	t.Helper()
	for _, n := range names {
		for _, m := range fixture.MessageRows(t, h.pool, fixture.Messages{Users: []string{h.u[n]}, Status: "pending"}) {
			fixture.SetMessages(t, h.pool, fixture.MessageChange{ID: m.ID, Status: "pending", SetStatus: "sent", SentAt: at})
			fixture.Ledger(t, h.pool, fixture.LedgerRow{Message: m.ID, Transport: pricing.MetaTransport, Status: "sent",
				FirstAttempt: at, LastAttempt: at})
		}
	}
}

// receipt applies one of WhatsApp's receipts to the user's goodbye.
func (h *history) receipt(t *testing.T, name, status string, at time.Time, code string) {
	t.Helper()
	fixture.SetMessages(t, h.pool, fixture.MessageChange{User: h.u[name], ProviderID: "wamid." + h.u[name]})
	if _, ok, err := activity.Receipt(context.Background(), h.pool, "wamid."+h.u[name], status,
		activity.ReceiptOptions{At: at, ErrorCode: code}); err != nil || !ok {
		t.Fatalf("receipt %s for %s: ok %v, %v", status, name, ok, err)
	}
}

func (h *history) fire(t *testing.T, at time.Time, name string, trigger sm.Trigger) {
	t.Helper()
	before := h.lastID(t)
	fixture.ConsoleFire(t, h.pool, h.u[name], string(trigger), at)
	h.stamp(t, before, at)
}

func TestFunnelCountsAScriptedHistory(t *testing.T) {
	t.Parallel()
	h := newHistory(t)
	srv := serve(t, h.pool, historyAsOf)
	var o console.Overview
	_, body := get(t, srv, "/", viewer, viewerPassword, true)
	decode(t, body, &o)

	if len(o.Funnel) != console.Weeks {
		t.Fatalf("%d cohorts, want %d", len(o.Funnel), console.Weeks)
	}
	want := map[string]console.Cohort{
		"2026-02-09": {Goodbyes: 10, Accepted: 9, AnsweredHelp: 2, AnsweredRemindLater: 1, AnsweredNotNow: 1,
			CameBack: 2, TimedOut: 3, Undelivered: 1, Waiting: 0, Reactivated: 4},
		"2026-02-23": {Goodbyes: 5, Accepted: 5, Delivered: 2, Read: 1, FailedLate: 1, Receipts: 3, CameBack: 1, Waiting: 4, Reactivated: 1},
	}
	for i, c := range o.Funnel {
		wantStart := time.Date(2026, 1, 12, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 7 * 24 * time.Hour)
		if !c.WeekStart.Equal(wantStart) {
			t.Errorf("cohort %d starts %s, want %s", i, c.WeekStart, wantStart)
		}
		w := want[c.WeekStart.Format(time.DateOnly)] // zero: no goodbye that week (dz's is before them all)
		w.WeekStart, w.ReactivatedShare, w.WindowClosed = c.WeekStart, c.ReactivatedShare, c.WindowClosed
		if c != w {
			t.Errorf("cohort of %s:\n got %+v\nwant %+v", c.WeekStart.Format(time.DateOnly), c, w)
		}
	}
	if a := o.Funnel[4]; a.ReactivatedShare != 0.4 || a.WindowClosed {
		t.Errorf("cohort A: reactivated share %v (window closed %v), want 0.4, still open", a.ReactivatedShare, a.WindowClosed)
	}

	// Users by state at each week's end, worked back from now, against a
	// replay of the log up to then (each user's last move before the
	// instant, or active; weeks are half-open, so a past week ends just
	// before its next Monday, and the current one at as-of).
	for _, w := range o.Weeks {
		replay := fixture.ConsoleStatesAt(t, h.pool, w.At, w.At.Equal(historyAsOf))
		for _, st := range sm.States() {
			if w.Users[string(st)] != replay[string(st)] {
				t.Errorf("at %s: %d %s, the log replays to %d", w.At, w.Users[string(st)], st, replay[string(st)])
			}
		}
	}
	last := o.Weeks[len(o.Weeks)-1].Users
	if last["dormant"] != 3 || last["goodbye_sent"] != 5 || last["help_flow"] != 1 || last["remind_later"] != 1 {
		t.Errorf("now: %v, want 3 dormant (u4, u8, u9), 5 waiting on a goodbye (z, u10, u12..u14), 1 in help, 1 to remind", last)
	}
}

// Issue 56, finding 7: weeks are half-open, [Monday 00:00, next Monday
// 00:00) UTC. Three goodbyes logged at exactly Monday 2026-02-16 00:00:00
// are that week's cohort, in the funnel and the lift (the console counted
// them in the week of 02-09), and the users by state at the end of the
// week of 02-09 are the state just before them.
func TestConsoleWeeksStartAtMondayMidnight(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	monday := time.Date(2026, 2, 16, 0, 0, 0, 0, time.UTC)
	for range 3 {
		u := fixture.User(t, pool, fixture.UserOptions{State: string(sm.GoodbyeSent), LastActivity: monday.Add(-15 * 24 * time.Hour),
			GoodbyeSentAt: &monday, StateEnteredAt: &monday})
		fixture.LogMoves(t, pool, []fixture.LoggedMove{{User: u, From: "active", To: "goodbye_sent", Trigger: "inactivity_14d", At: monday}})
	}
	fixture.ConsoleUsersSince(t, pool, longBefore)
	srv := serve(t, pool, historyAsOf)
	var o console.Overview
	_, body := get(t, srv, "/", viewer, viewerPassword, true)
	decode(t, body, &o)

	goodbyes := map[string]int64{}
	for _, c := range o.Funnel {
		goodbyes[c.WeekStart.Format(time.DateOnly)] = c.Goodbyes
	}
	if goodbyes["2026-02-16"] != 3 || goodbyes["2026-02-09"] != 0 {
		t.Errorf("funnel: %d goodbyes in the week of 02-16 and %d in 02-09's, want 3 and 0", goodbyes["2026-02-16"], goodbyes["2026-02-09"])
	}
	if o.Lift == nil || len(o.Lift.Cohorts) != 1 || !o.Lift.Cohorts[0].WeekStart.Equal(monday) || o.Lift.Cohorts[0].Treatment.Users != 3 {
		t.Errorf("lift cohorts %+v, want one, the week of 02-16 with 3 treated", o.Lift)
	}
	sent := map[string]int64{}
	for _, w := range o.Weeks {
		sent[w.WeekStart.Format(time.DateOnly)] = w.Users[string(sm.GoodbyeSent)]
	}
	if sent["2026-02-09"] != 0 || sent["2026-02-16"] != 3 {
		t.Errorf("goodbye_sent at the end of the weeks of 02-09 and 02-16: %d and %d, want 0 and 3", sent["2026-02-09"], sent["2026-02-16"])
	}
}
