package main_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Issue 55, finding 8: Go's HTTP client sends a POST that carries an
// Idempotency-Key again on its own when a kept-alive connection dies after
// the request was written (net/http's Request.isReplayable), behind the
// delivery engine's back: the resend skipped the check before the send,
// and a goodbye went out, under the same key, 1.41 s after its user
// answered.
//
// Here the bot, a raw TCP receiver, keeps its connections alive. Four
// goodbyes go out one after another through the shipped binary (one
// worker, unpaced): the first is answered 200 on a connection kept open;
// the second, the next request on that reused connection, is read, its
// user answers the bot (engagement_fire, on the bot's own connections),
// and the connection is reset before any answer. The third opens a new
// connection, kept alive too; the fourth, on it, is read and reset, and
// nobody answers. The client must send neither again: the engine gets the
// failure, and every attempt it makes passes its own check first. The
// second goodbye reaches the bot once and is never sent again (its user
// answered); the fourth is attempted again by the engine, under its same
// key, and delivered. Every request the bot read is an attempt the ledger
// counts.
func TestAKeptAliveConnectionThatDiesIsNotResentBehindTheEngine(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.NewPool(t)
	ctx := context.Background()
	botDB, err := postgres.Open(ctx, dbURL, "bot") // the bot's own connections
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(botDB.Close)

	const n = 4
	day := time.Now().UTC().Truncate(24 * time.Hour)
	start, _ := fixture.Goodbye.Period.Bounds(day)
	users, ids, keys := make([]string, n), make([]string, n), make([]string, n)
	goodbyes := make([]fixture.DueSend, n)
	for i := range n {
		users[i] = fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: day.Add(-15 * 24 * time.Hour),
			GoodbyeSentAt: &day, GoodbyeExpiresAt: fixture.Ptr(day.Add(48 * time.Hour))})
		keys[i] = fixture.Goodbye.Key(users[i], day)
		goodbyes[i] = fixture.DueSend{User: users[i], Type: "goodbye", CatalogKey: "engagement.goodbye.self_select", Params: `{}`,
			JID: fmt.Sprintf("55118%08d@s.whatsapp.net", i), Key: keys[i], Ago: time.Duration(n+1-i) * time.Second}
	}
	queued := fixture.DueSends(t, pool, start, goodbyes...)
	for i := range n {
		ids[i] = queued[keys[i]]
	}

	var (
		mu       sync.Mutex
		answered time.Time
		fireErr  error
	)
	answersThenResets := func(conn *net.TCPConn, req webhooktest.Request, done <-chan struct{}) {
		_, err := activity.Fire(ctx, botDB, users[1], sm.GoodbyeAnswerHelp, activity.FireOptions{})
		mu.Lock()
		answered, fireErr = time.Now(), err
		mu.Unlock()
		webhooktest.Reset()(conn, req, done)
	}
	bot := webhooktest.New(t)
	bot.Script(keys[0], webhooktest.KeepAlive())
	bot.Script(keys[1], answersThenResets, webhooktest.OK())
	bot.Script(keys[2], webhooktest.KeepAlive())
	bot.Script(keys[3], webhooktest.Reset(), webhooktest.OK())

	env := cmdtest.Env("DATABASE_URL="+dbURL, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.URL)
	res := cmdtest.Run(t, binary(t), env, "--send-interval", "0", "--workers", "1", "--retry-base", "20ms", "--output", "json")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	mu.Lock()
	if fireErr != nil {
		t.Fatalf("the user's answer: %v", fireErr)
	}
	if answered.IsZero() {
		t.Fatalf("the second goodbye never reached the bot; requests: %+v", bot.Requests())
	}
	mu.Unlock()

	// sends are the requests for key that were a message, not a lookup
	// (a probe under the message's key, which a receiver never sends:
	// how queue-process asks whether a request in doubt arrived, before
	// it cancels a message no longer wanted, issue 55).
	sends := func(key string) (sends, lookups []webhooktest.Request) {
		for _, r := range bot.ByKey(key) {
			if r.Body.MessageType == transport.ProbeType {
				if r.Body.Text != "" || r.Body.DestinationJID != "" {
					t.Errorf("a lookup carried the message's text or JID")
				}
				lookups = append(lookups, r)
				continue
			}
			sends = append(sends, r)
		}
		return sends, lookups
	}
	reqs, lookups := sends(keys[1])
	for _, r := range reqs[1:] {
		t.Errorf("the goodbye whose user answered reached the bot again %s after the answer, under the same key", r.At.Sub(answered))
	}
	if len(lookups) != 1 {
		t.Errorf("the goodbye in doubt whose user answered was looked up %d times, want once before it was cancelled", len(lookups))
	}
	if got, _ := sends(keys[3]); len(got) != 2 {
		t.Errorf("the goodbye whose connection was reset reached the bot %d times, want twice: once, then once more by the engine", len(got))
	}
	for i := range n {
		status, attempts := fixture.MessageByID(t, pool, ids[i]).Status, 0
		if l := fixture.LedgerOf(t, pool, ids[i], ""); l != nil {
			attempts = l.Attempts
		}
		sent, _ := sends(keys[i])
		got := len(sent)
		t.Logf("goodbye %d: %s, %d attempts recorded, %d requests read by the bot", i, status, attempts, got)
		if attempts != got {
			t.Errorf("goodbye %d: the ledger counts %d attempts, the bot read %d requests: a request went out that the engine did not make", i, attempts, got)
		}
		if i != 1 && status != "sent" {
			t.Errorf("goodbye %d is %s, want sent", i, status)
		}
		if i == 1 && status != "cancelled" {
			t.Errorf("goodbye %d, in doubt, no longer wanted, and never had by the bot (its lookup was answered as new), is %s, want cancelled", i, status)
		}
	}
}
