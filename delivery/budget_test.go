package delivery_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

func TestParseRamp(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]delivery.Ramp{"250,2": {250, 2}, " 50 , 1.5 ": {50, 1.5}, "10,1": {10, 1}} {
		if got, err := delivery.ParseRamp(in); err != nil || got != want {
			t.Errorf("ParseRamp(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "250", "250,", ",2", "0,2", "-5,2", "250,0.5", "250,x", "250,2,3", "250,1000", "250,Inf", "1e3,2"} {
		if got, err := delivery.ParseRamp(in); err == nil {
			t.Errorf("ParseRamp(%q) = %+v, want an error", in, got)
		}
	}
}

func TestRampLimitOn(t *testing.T) {
	t.Parallel()
	r := delivery.Ramp{Start: 250, Factor: 2}
	for day, want := range map[int]int{0: 250, 1: 500, 2: 1000, 3: 1000, 400: 1000} {
		if got := r.LimitOn(day, 1000); got != want {
			t.Errorf("day %d: %d, want %d", day, got, want)
		}
	}
	if got := (delivery.Ramp{Start: 100, Factor: 1.5}).LimitOn(1, 1000); got != 150 {
		t.Errorf("100 × 1.5 on day 1 = %d, want 150", got)
	}
}

// budgetBot is a webhook that answers 200, or holds the first request
// until release is closed.
type budgetBot struct {
	requests atomic.Int64
	arrived  chan struct{}
	release  chan struct{}
	holdOne  sync.Once
	server   *httptest.Server
}

func newBudgetBot(t *testing.T, hold bool) (*budgetBot, transport.Transport) {
	b := &budgetBot{arrived: make(chan struct{}, 1), release: make(chan struct{})}
	if !hold {
		close(b.release)
	}
	b.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.requests.Add(1)
		b.holdOne.Do(func() {
			b.arrived <- struct{}{}
			<-b.release
		})
	}))
	t.Cleanup(b.server.Close)
	hook, err := transport.NewWebhook(transport.WebhookConfig{URL: b.server.URL})
	if err != nil {
		t.Fatal(err)
	}
	return b, hook
}

// A ramp of 2,2 under a limit of 5 sends to 2 recipients on its first
// day, 4 the next (the line moves up to use the room the ramp made), then
// 5, the limit, each day after.
func TestRampGrowsTheBudgetDayByDay(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	bot, hook := newBudgetBot(t, false)
	fixture.DueToRecipients(t, pool, 20, "budget-")
	for day, want := range []int{2, 4, 5, 5, 4} {
		p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{
			Transport: hook, SendInterval: -1, Logger: zerolog.Nop(),
			DailyLimit: 5, Ramp: delivery.Ramp{Start: 2, Factor: 2},
			ClockOffset: time.Duration(day) * (delivery.BudgetWindow + time.Minute),
		})
		if err != nil {
			t.Fatal(err)
		}
		before := bot.requests.Load()
		sum, err := p.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := bot.requests.Load() - before; got != int64(want) || sum.Sent != want {
			t.Errorf("day %d: %d requests, %d sent, want %d", day, got, sum.Sent, want)
		}
		if limit := min(2<<day, 5); sum.Budget == nil || sum.Budget.Limit != limit {
			t.Errorf("day %d: budget %+v, want the limit %d", day, sum.Budget, limit)
		}
	}
}

// A shutdown while the first send is in flight hands the rest of the
// claim back unsent, and gives their budget back: only the recipient whose
// request went out keeps their slot. Both ways a claim spends the budget:
// near the limit (5: recipient by recipient, under the lock) and with
// ample room (10,000: a slot per recipient of the claim, counted at once).
func TestMessagesHandedBackGiveTheirBudgetBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                    string
		limit, released, queued int
	}{
		{"near_the_limit", 5, 4, 3},
		{"with_ample_room", 10_000, 7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			bot, hook := newBudgetBot(t, true)
			fixture.DueToRecipients(t, pool, 8, "budget-")
			p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{
				Transport: hook, SendInterval: -1, Workers: 1, DailyLimit: tc.limit, Logger: zerolog.Nop(),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan delivery.ProcessSummary)
			go func() {
				sum, err := p.Run(ctx)
				if err != nil {
					t.Error(err)
				}
				done <- sum
			}()
			<-bot.arrived
			cancel()
			close(bot.release)
			sum := <-done
			if sum.Sent != 1 || sum.Released != tc.released || sum.Budget == nil || sum.Budget.Used != 1 || sum.Budget.Waiting != tc.queued {
				t.Fatalf("sent %d, released %d, budget %+v; want the one in flight sent, the %d others of the claim handed back, 1 used and %d waiting",
					sum.Sent, sum.Released, sum.Budget, tc.released, tc.queued)
			}
			if used := fixture.Deref(fixture.BudgetOf(t, pool, "webhook").Used); used != 1 {
				t.Errorf("the budget's counter is %d, want 1", used)
			}

			// The next run has the slots given back: the ones handed back
			// go now.
			p, err = delivery.NewProcessor(pool, delivery.ProcessorConfig{Transport: hook, SendInterval: -1, DailyLimit: tc.limit, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			next, err := p.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if next.Sent != tc.released || bot.requests.Load() != int64(1+tc.released) || next.Budget == nil ||
				next.Budget.Used != 1+tc.released || next.Budget.Waiting != tc.queued {
				t.Errorf("the next run sent %d (%d requests in all), budget %+v; want %d, %d used and %d waiting",
					next.Sent, bot.requests.Load(), next.Budget, tc.released, 1+tc.released, tc.queued)
			}
		})
	}
}

// A claim with ample room under a send budget locks its messages first and
// counts its recipients onto the budget's row last (claim.sql), while a
// hand-back, a recovery and the line's advance take the budget's lock
// first, then their messages. A FOR UPDATE keeps the lock of a row it
// passed over because the row changed under it (another worker's claim
// committing), so a claim could hold a message a hand-back of its own
// process then waited on: the two deadlocked, and queue-process exited 1
// with "claim messages: claim: ERROR: deadlock detected" (issue 60's
// suite run, the Railway files behind PgBouncer, 2026-11-30). A claim
// must wait on the budget holding no message: here another connection
// holds the budget's lock while the worker claims, then locks the
// messages as a hand-back does.
func TestAClaimWaitsOnTheBudgetHoldingNoMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewPool(t)
	bot, hook := newBudgetBot(t, true)
	user := fixture.DueToRecipients(t, pool, 3, "budget-")
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{
		Transport: hook, SendInterval: -1, Workers: 1, ClaimBatch: 1, DailyLimit: 10_000, Logger: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var sum delivery.ProcessSummary
	go func() {
		var err error
		sum, err = p.Run(ctx)
		done <- err
	}()
	<-bot.arrived // the first claim counted, its send in flight

	handBack, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = handBack.Rollback(ctx) }()
	fixture.LockBudget(t, handBack, "webhook")
	close(bot.release) // the worker claims the next message, and waits on the budget
	if _, ok := fixture.PollFor(time.Minute, func() (int, bool) { n := fixture.WaitingOnLocks(t, pool); return n, n > 0 }); !ok {
		t.Fatal("the worker's next claim never waited on the budget")
	}
	for _, id := range fixture.MessageIDs(t, pool, fixture.Messages{Users: []string{user}}, 0) {
		fixture.LockMessage(t, handBack, id)
	}
	if err := handBack.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the run failed: %v", err)
	}
	if sum.Sent != 3 || bot.requests.Load() != 3 {
		t.Errorf("sent %d in %d requests, want the 3 messages sent once each", sum.Sent, bot.requests.Load())
	}
}

// A message whose place in line falls inside the quiet hours, in its
// user's time zone, waits for them to end: the budget never moves a
// message into them. The window is full with a recipient claimed 22 hours
// ago, so the first slot frees in 2 hours, inside quiet hours from 1 hour
// to 3 hours from now.
func TestBudgetNeverMovesAMessageIntoQuietHours(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	_, hook := newBudgetBot(t, false)
	fixture.DueToRecipients(t, pool, 3, "budget-")
	fixture.SpentOn(t, pool, "webhook", fixture.NewID(), time.Now().Add(-22*time.Hour))
	now := time.Now().UTC()
	quiet, err := delivery.ParseQuietHours(now.Add(time.Hour).Format("15:04") + "-" + now.Add(3*time.Hour).Format("15:04"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{
		Transport: hook, SendInterval: -1, DailyLimit: 1, QuietHours: quiet, Logger: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := p.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Sent != 0 || sum.DeferReasons["budget"] != 3 {
		t.Fatalf("sent %d, deferred %v; want none sent and 3 deferred for the budget", sum.Sent, sum.DeferReasons)
	}
	var due []time.Time
	for _, m := range fixture.AllMessages(t, pool) {
		if m.Status == "pending" {
			due = append(due, m.ScheduledFor)
		}
	}
	for _, at := range due {
		at = at.UTC()
		if quiet.Contains(at.Sub(at.Truncate(24 * time.Hour))) {
			t.Errorf("a message moved to %s, inside the quiet hours %s", at.Format(time.RFC3339), quiet)
		}
	}
	if len(due) != 3 || due[0].Before(now.Add(2*time.Hour)) {
		t.Errorf("pending at %v; want 3, the first no earlier than when its slot frees, in 2 hours", due)
	}
}

// Under a budget, messages go oldest due first whatever their kind: a
// weekly review does not starve a goodbye, nor the reverse. Ten messages,
// goodbyes and weekly reviews by turns, each to a recipient of its own;
// a budget of 4 sends the 4 due first, then (a day on) the next 4, then
// the last 2.
func TestBudgetTakesTheOldestDueFirstWhateverTheKind(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	_, hook := newBudgetBot(t, false)
	now := time.Now()
	leaving := fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: now.Add(-15 * 24 * time.Hour), GoodbyeSentAt: &now})
	active := fixture.User(t, pool, fixture.UserOptions{LastActivity: now})
	for i := 1; i <= 10; i++ {
		m := fixture.Message{User: active, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey}
		if i%2 == 1 {
			m = fixture.Message{User: leaving, Type: "goodbye", CatalogKey: "engagement.goodbye.self_select"}
		}
		m.Params, m.JID = `{"count":"2"}`, fmt.Sprintf("55119%08d@s.whatsapp.net", i)
		m.ScheduledFor, m.Key = now.Add(-time.Duration(10-i)*time.Minute), fmt.Sprintf("order-%02d", i)
		fixture.Queue(t, pool, m)
	}
	for day, want := range [][]string{
		{"order-01", "order-02", "order-03", "order-04"},
		{"order-05", "order-06", "order-07", "order-08"},
		{"order-09", "order-10"},
	} {
		p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{
			Transport: hook, SendInterval: -1, DailyLimit: 4, Logger: zerolog.Nop(),
			ClockOffset: time.Duration(day) * (delivery.BudgetWindow + time.Minute),
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		var got []string
		since := time.Now().Add(time.Duration(day)*(delivery.BudgetWindow+time.Minute) - time.Hour)
		for _, m := range fixture.AllMessages(t, pool) {
			if m.Status == "sent" && m.SentAt.After(since) {
				got = append(got, m.Key())
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("day %d sent %v, want %v", day, got, want)
		}
	}
}
