package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// kindsBot is a webhook that records the message type of every request.
type kindsBot struct {
	mu    sync.Mutex
	types []string
}

func newKindsBot(t *testing.T) (*kindsBot, transport.Transport) {
	t.Helper()
	b := &kindsBot{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Type string `json:"message_type"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		b.mu.Lock()
		b.types = append(b.types, body.Type)
		b.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	hook, err := transport.NewWebhook(transport.WebhookConfig{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return b, hook
}

// sent returns the types sent so far, and forgets them.
func (b *kindsBot) sent() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.types
	b.types = nil
	return out
}

// count is how many of types are kind.
func count(types []string, kind string) int {
	n := 0
	for _, t := range types {
		if t == kind {
			n++
		}
	}
	return n
}

// queueKind queues n messages of kind, each for a new user in the state
// the kind is sent in and to a recipient of its own, due dueAgo and queued
// queuedAgo before now (the database's).
func queueKind(t *testing.T, pool *pgxpool.Pool, kind string, n int, dueAgo, queuedAgo time.Duration) {
	t.Helper()
	spec := map[string][3]string{ // state, catalog key, params
		"goodbye":       {"goodbye_sent", "engagement.goodbye.self_select", "{}"},
		"weekly_review": {"active", "engagement.weekly_review.celebration", `{"count":"2"}`},
		"reminder":      {"remind_later", "engagement.reminder.come_back", "{}"},
	}[kind]
	state, key, params := spec[0], spec[1], spec[2]
	for range n {
		now := time.Now()
		user := fixture.User(t, pool, fixture.UserOptions{State: state, LastActivity: now.Add(-time.Hour), GoodbyeSentAt: &now})
		fixture.Queue(t, pool, fixture.Message{User: user, Type: kind, CatalogKey: key, Params: params, JID: jidOf(user),
			ScheduledFor: now.Add(-dueAgo), CreatedAt: now.Add(-queuedAgo), Key: user + ":" + kind})
	}
}

// Under a budget that cannot take every due message, --kind-priority
// goodbye sends the goodbyes due today before the weekly reviews due
// since yesterday; without it the oldest due go first (issue 46: a
// Monday's weekly reviews pushed Tuesday's goodbyes back by days).
func TestKindPriorityUnderTheBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		priority []string
		want     string
	}{
		{"goodbyes_first", []string{"goodbye"}, "goodbye"},
		{"oldest_first_without_it", nil, "weekly_review"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			bot, hook := newKindsBot(t)
			queueKind(t, pool, "weekly_review", 8, 20*time.Hour, 20*time.Hour)
			queueKind(t, pool, "goodbye", 4, time.Hour, time.Hour)
			p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{
				Transport: hook, SendInterval: -1, DailyLimit: 4, KindPriority: tc.priority, Logger: zerolog.Nop(),
			})
			if err != nil {
				t.Fatal(err)
			}
			sum, err := p.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := bot.sent(); len(got) != 4 || count(got, tc.want) != 4 {
				t.Errorf("sent %v, want the 4 slots to the %ss", got, tc.want)
			}
			if sum.DeferReasons["budget"] != 8 {
				t.Errorf("deferred %v, want 8 on the budget", sum.DeferReasons)
			}
		})
	}
}

// The line the budget keeps follows the priority too: goodbyes queued
// while a day's weekly reviews wait on the budget do not go behind them,
// they take the next slots that free.
func TestKindPriorityHoldsInTheBudgetsLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		priority []string
		want     string
	}{
		{"goodbyes_jump_the_line", []string{"goodbye"}, "goodbye"},
		{"oldest_first_without_it", nil, "weekly_review"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			bot, hook := newKindsBot(t)
			run := func(offset time.Duration) delivery.ProcessSummary {
				t.Helper()
				p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{
					Transport: hook, SendInterval: -1, DailyLimit: 4, KindPriority: tc.priority,
					ClockOffset: offset, Logger: zerolog.Nop(),
				})
				if err != nil {
					t.Fatal(err)
				}
				sum, err := p.Run(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return sum
			}
			// Monday: 12 weekly reviews, 4 go, 8 wait on the budget.
			queueKind(t, pool, "weekly_review", 12, time.Minute, time.Minute)
			run(0)
			if got := bot.sent(); count(got, "weekly_review") != 4 {
				t.Fatalf("the first run sent %v, want 4 weekly reviews", got)
			}
			// Twelve hours on, 4 goodbyes are due: the window is full.
			queueKind(t, pool, "goodbye", 4, -12*time.Hour, -12*time.Hour)
			run(12 * time.Hour)
			if got := bot.sent(); len(got) != 0 {
				t.Fatalf("a full window sent %v", got)
			}
			// A day on, the 4 slots free: who takes them?
			run(delivery.BudgetWindow + time.Minute)
			if got := bot.sent(); len(got) != 4 || count(got, tc.want) != 4 {
				t.Errorf("the slots that freed went to %v, want the %ss", got, tc.want)
			}
		})
	}
}

// No kind starves: a weekly review queued longer than the priority's
// most wait goes before goodbyes.
func TestKindPriorityAgesSoNoKindStarves(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	bot, hook := newKindsBot(t)
	queueKind(t, pool, "weekly_review", 2, time.Hour, 80*time.Hour) // queued 80 hours ago
	queueKind(t, pool, "weekly_review", 4, time.Hour, 20*time.Hour)
	queueKind(t, pool, "goodbye", 4, time.Hour, time.Hour)
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{
		Transport: hook, SendInterval: -1, DailyLimit: 4, KindPriority: []string{"goodbye"},
		KindPriorityMaxWait: 72 * time.Hour, Logger: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := bot.sent()
	if len(got) != 4 || count(got, "weekly_review") != 2 || count(got, "goodbye") != 2 {
		t.Errorf("sent %v, want the 2 weekly reviews queued 80 hours ago, then 2 goodbyes", got)
	}
}

func TestParseKindPriority(t *testing.T) {
	t.Parallel()
	got, err := delivery.ParseKindPriority(" goodbye , weekly_review")
	if err != nil || !slices.Equal(got, []string{"goodbye", "weekly_review"}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"goodbye,farewell", "goodbye,goodbye", "goodbye,"} {
		if _, err := delivery.ParseKindPriority(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// capUser makes a user in state with a message of kind already sent
// sentAgo before now (none when sentAgo is 0), and queues n messages of
// kind due now, each under a key of its own, replay_until replayIn from
// now. It returns the user's id.
func capUser(t *testing.T, pool *pgxpool.Pool, kind, state string, sentAgo, replayIn time.Duration, n int) string {
	t.Helper()
	now := time.Now()
	user := fixture.User(t, pool, fixture.UserOptions{State: state, LastActivity: now.Add(-time.Hour), GoodbyeSentAt: &now})
	if sentAgo > 0 {
		fixture.Queue(t, pool, fixture.Message{User: user, Type: kind, CatalogKey: "x", JID: jidOf(user),
			ScheduledFor: now.Add(-sentAgo), Status: "sent", SentAt: now.Add(-sentAgo), Key: user + ":sent"})
	}
	for i := 1; i <= n; i++ {
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey,
			Params: `{"count":"2"}`, JID: jidOf(user), ScheduledFor: now.Add(-time.Minute + time.Duration(i)*time.Millisecond),
			ReplayUntil: now.Add(replayIn), Key: fmt.Sprintf("%s:due:%d", user, i)})
	}
	return user
}

// statuses is user's messages' status and reason ("sent",
// "pending:frequency", "cancelled:frequency"), oldest due first.
func statuses(t *testing.T, pool *pgxpool.Pool, user string) []string {
	t.Helper()
	var out []string
	for _, m := range fixture.AllMessages(t, pool) {
		if m.UserID != user {
			continue
		}
		s := m.Status
		switch {
		case m.CancelReason != nil:
			s += ":" + *m.CancelReason
		case m.DeferredReason != nil:
			s += ":" + *m.DeferredReason
		}
		out = append(out, s)
	}
	return out
}

// --per-user-cap 1 over a week: one marketing message per user per week,
// across kinds. A user sent a goodbye two days ago waits for their
// weekly review until the goodbye leaves the window (five days on), or
// loses it when its week is over first; of two due for one user, one
// goes and the other waits a week (its period is longer); a message of a kind the cap does not count (not marketing) does not
// hold anything back.
func TestPerUserCapAcrossKinds(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	bot, hook := newKindsBot(t)
	waits := capUser(t, pool, "goodbye", "active", 48*time.Hour, 6*24*time.Hour, 1)
	stale := capUser(t, pool, "goodbye", "active", 48*time.Hour, 24*time.Hour, 1)
	two := capUser(t, pool, "", "active", 0, 8*24*time.Hour, 2)
	uncounted := capUser(t, pool, "opt_out_confirmation", "active", time.Hour, 6*24*time.Hour, 1)
	run := func(offset time.Duration) delivery.ProcessSummary {
		t.Helper()
		p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{
			Transport: hook, SendInterval: -1, PerUserCap: 1, PerUserCapWindow: 7 * 24 * time.Hour,
			ClockOffset: offset, Logger: zerolog.Nop(),
		})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := p.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	sum := run(0)
	if got := len(bot.sent()); got != 2 || sum.DeferReasons["frequency"] != 2 || sum.CancelReasons["frequency"] != 1 {
		t.Errorf("sent %d, deferred %v, cancelled %v; want 2 sent, 2 deferred and 1 cancelled on the cap", got, sum.DeferReasons, sum.CancelReasons)
	}
	for user, want := range map[string][]string{
		waits:     {"sent", "pending:frequency"},
		stale:     {"sent", "cancelled:frequency"},
		two:       {"sent", "pending:frequency"},
		uncounted: {"sent", "sent"},
	} {
		if got := statuses(t, pool, user); !slices.Equal(got, want) {
			t.Errorf("user %s: %v, want %v", user, got, want)
		}
	}
	// Five days and a minute on, the goodbye sent two days before the
	// first run has left the window: that weekly review goes; the user
	// who got one at the first run still waits.
	run(5*24*time.Hour + time.Minute)
	if got := bot.sent(); len(got) != 1 {
		t.Errorf("five days on, sent %v, want the one weekly review whose window has room", got)
	}
	if got := statuses(t, pool, waits); !slices.Equal(got, []string{"sent", "sent"}) {
		t.Errorf("the waiting user: %v", got)
	}
}

// jidOf is a recipient of user's own.
func jidOf(user string) string {
	return fmt.Sprintf("55%d@s.whatsapp.net", crc32.ChecksumIEEE([]byte(user))%1_000_000_000)
}
