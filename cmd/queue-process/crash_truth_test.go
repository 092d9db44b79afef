package main_test

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// dedupBot is a receiver that keeps docs/receiver.md's contract: it claims
// each Idempotency-Key before "sending" it to WhatsApp (counted in sent),
// answers a repeat of a key it sent with 200 and Idempotent-Replayed, and
// sends no probe (a lookup under a key it never had spends the key). After
// answering answerFirst sends it keeps every later request it sends
// waiting, unanswered, until the test ends: a process killed then has
// requests out whose outcome it never learnt.
type dedupBot struct {
	mu          sync.Mutex
	sent        map[string]int // key → times sent to WhatsApp (must stay 1)
	spent       map[string]bool
	answered    int
	answerFirst int
	reached     chan struct{} // closed when answerFirst sends were answered
	release     chan struct{} // closed by answerAll
	open        bool          // answerAll was called
	down        int           // when set, every request is answered this status (an outage)
	// acks, when set, is the bot's database: each send's delivery ack is
	// forwarded (engagement_receipt) before the bot answers, as Baileys'
	// come, and forwarded again later while the database does not answer.
	acks    *pgxpool.Pool
	unacked []string
	server  *httptest.Server
}

func newDedupBot(t *testing.T, answerFirst int) *dedupBot {
	b := &dedupBot{sent: map[string]int{}, spent: map[string]bool{}, answerFirst: answerFirst,
		reached: make(chan struct{}), release: make(chan struct{})}
	b.server = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(func() {
		b.answerAll()
		b.server.CloseClientConnections()
		b.server.Close()
	})
	return b
}

func (b *dedupBot) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	probe := r.Header.Get(transport.ProbeHeader) == "1"
	b.mu.Lock()
	if down := b.down; down != 0 {
		b.mu.Unlock()
		w.WriteHeader(down)
		return
	}
	if b.spent[key] {
		id := ""
		if b.sent[key] > 0 {
			id = "wa." + key
		}
		b.mu.Unlock()
		w.Header().Set(transport.ReplayedHeader, "true")
		_, _ = w.Write([]byte(`{"duplicate":true,"message_id":"` + id + `"}`))
		return
	}
	b.spent[key] = true
	if probe {
		b.mu.Unlock()
		_, _ = w.Write([]byte(`{"message_id":null}`))
		return
	}
	b.sent[key]++
	hold := b.answered >= b.answerFirst && !b.open
	if !hold {
		b.answered++
		if b.answered == b.answerFirst {
			close(b.reached)
		}
	}
	b.mu.Unlock()
	if hold {
		select {
		case <-b.release:
		case <-r.Context().Done():
		}
		return
	}
	if b.acks != nil {
		b.ack("wa." + key)
	}
	_, _ = w.Write([]byte(`{"message_id":"wa.` + key + `"}`))
}

// ack forwards id's delivery ack, or keeps it to forward again.
func (b *dedupBot) ack(id string) {
	if _, _, err := activity.Receipt(context.Background(), b.acks, id, activity.ReceiptDelivered, activity.ReceiptOptions{}); err != nil {
		b.mu.Lock()
		b.unacked = append(b.unacked, id)
		b.mu.Unlock()
	}
}

// reack forwards the acks the database did not take, once each, and
// reports how many it still holds.
func (b *dedupBot) reack() int {
	b.mu.Lock()
	ids := b.unacked
	b.unacked = nil
	b.mu.Unlock()
	for _, id := range ids {
		b.ack(id)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.unacked)
}

func (b *dedupBot) setDown(status int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = status
}

// answerAll ends the hold: the held requests end unanswered (their
// process is dead by then), and every later one is answered.
func (b *dedupBot) answerAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		b.open = true
		close(b.release)
	}
}

// goodbyesDue makes n users in goodbye_sent since now, each with their
// goodbye due, a second apart, and returns the users.
func goodbyesDue(t *testing.T, pool *pgxpool.Pool, now time.Time, n int) []string {
	t.Helper()
	users := make([]string, n)
	for i := range users {
		users[i] = fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: now.Add(-15 * 24 * time.Hour),
			GoodbyeSentAt: fixture.Ptr(now), GoodbyeExpiresAt: fixture.Ptr(now.Add(48 * time.Hour))})
	}
	at := time.Now()
	day := at.UTC().Truncate(24 * time.Hour)
	for i, u := range users {
		fixture.Queue(t, pool, fixture.Message{User: u, Type: "goodbye", CatalogKey: "engagement.goodbye.self_select",
			JID: "55119" + u[:8] + "@s.whatsapp.net", ScheduledFor: at.Add(-time.Duration(n-1-i) * time.Second),
			Key: u + ":goodbye_sent:" + day.Format(time.DateOnly), PeriodStart: day})
	}
	return users
}

// sentKeys is every key the bot sent to WhatsApp, and fails the test for
// one sent twice.
func (b *dedupBot) sentKeys(t *testing.T) map[string]bool {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]bool{}
	for k, n := range b.sent {
		if n > 1 {
			t.Errorf("message %s was sent %d times", k, n)
		}
		out[k] = true
	}
	return out
}

// Issue 55, finding 2: a crash mid-batch turned sent messages into
// cancelled ones and spent the budget twice. --daily-limit 60 over 90
// goodbyes; the bot answers 30 requests and holds the next ones; the
// process is killed -9; the users who got a goodbye answer it or opt out;
// a new run
// delivers the rest. No more than 60 users ever get a goodbye, every
// goodbye the bot sent is recorded sent (with the bot's id), none of them
// cancelled, and nothing is sent twice.
func TestACrashMidBatchNeverRecordsASentMessageCancelled(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	ctx := context.Background()
	now := fixture.Now(t, pool)
	const users, limit = 90, 60
	goodbyesDue(t, pool, now, users)
	bot := newDedupBot(t, 30)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_DAILY_LIMIT="+strconv.Itoa(limit))
	args := []string{"--transport", "webhook", "--webhook-url", bot.server.URL, "--send-interval", "5ms",
		"--output", "json"}

	cmd, _, stderr := cmdtest.Command(bin, env, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-bot.reached:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the bot never answered 30 requests: %s", stderr)
	}
	// Let the workers put a few more requests out, then kill.
	fixture.PollFor(10*time.Second, func() (int, bool) { n := len(bot.sentKeys(t)); return n, n >= 36 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	bot.answerAll()
	first := bot.sentKeys(t)

	// The dead process's lease runs out, and the next run meets a bot that
	// is down: it settles the dead claims, and stops on the outage with
	// them back in the queue, in doubt.
	fixture.ExpireClaims(t, pool)
	down := append(slices.Clone(args[:len(args)-2]), "--output", "json")
	down[3] = "http://127.0.0.1:1" // --webhook-url: nothing listens
	if sum := queueSummary(t, cmdtest.Run(t, bin, env, down...)); sum.Stopped != "outage" {
		t.Fatalf("the run against a bot that is down: %+v, want stopped on the outage", sum)
	}
	doubted := map[string]bool{}
	for _, m := range fixture.AllMessages(t, pool) {
		if m.Status == "pending" && fixture.Deref(m.InDoubt) {
			doubted[m.Key()] = true
		}
	}
	if len(doubted) == 0 {
		t.Fatal("no message is in doubt after the crash")
	}

	// Every user who got one answers it. Those whose goodbye is in doubt
	// take the three doors in turn: one writes back, one says stop, and an
	// operator cancels the next one's (the opt-out and engagementctl
	// cancel, which cancel pending messages, must leave one in doubt to
	// the receiver's word too).
	var doors [3]int
	k := 0
	for _, key := range slices.Sorted(maps.Keys(first)) {
		user, _, _ := strings.Cut(key, ":")
		door := 0
		if doubted[key] {
			k++
			door = k % 3
		}
		doors[door]++
		var err error
		switch door {
		case 0:
			_, err = activity.Fire(ctx, pool, user, sm.UserMessage, activity.FireOptions{})
		case 1:
			_, err = activity.OptOut(ctx, pool, user, activity.SourceKeyword, activity.ConsentOptions{})
		case 2:
			if res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+url), "cancel", "--key", key); res.Code != 0 {
				t.Fatalf("engagementctl cancel: exit %d: %s", res.Code, res.Stderr)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d goodbyes sent before the crash, %d messages in doubt after it, doors %v; statuses %v", len(first), len(doubted), doors, statusCounts(t, pool))
	if doors[1] == 0 || doors[2] == 0 {
		t.Fatalf("the doors taken by goodbyes in doubt the bot sent: %v; want each", doors)
	}
	queueSummary(t, cmdtest.Run(t, bin, env, args...))

	sent := bot.sentKeys(t)
	if len(sent) > limit {
		t.Errorf("%d users got a goodbye under a daily limit of %d (%d before the crash)", len(sent), limit, len(first))
	}
	var cancelledSent, unrecorded int
	for _, m := range fixture.AllMessages(t, pool) {
		if m.MessageType != "goodbye" {
			continue
		}
		key, status, reason, pid := m.Key(), m.Status, fixture.Deref(m.CancelReason), fixture.Deref(m.ProviderMessageID)
		switch {
		case sent[key] && status == "cancelled":
			cancelledSent++
		case sent[key] && (status != "sent" || pid != "wa."+key):
			unrecorded++
			t.Logf("sent by the bot, recorded %s (%q, %q)", status, reason, pid)
		}
	}
	if cancelledSent != 0 || unrecorded != 0 {
		t.Errorf("of %d goodbyes the bot sent (%d before the crash), %d are recorded cancelled and %d otherwise not sent; want all sent",
			len(sent), len(first), cancelledSent, unrecorded)
	}
}
