package main_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
)

// A paced message is checked alone right before its request, but what
// comes between the check and the request (the pace's floor gate, the
// start's statement, a machine that stalls the process) is unbounded, and
// the check read the user as they were when its statement started: a wish
// that commits after it is not in what it read. In a CI run a request
// went out 305 ms after its user's opt-out, over the 250 ms bound. A
// paced request may start only within WishBound of the start of the
// check that cleared it; later, the message goes back to the queue unsent
// and is checked again. Here the floor gate, held by another connection,
// keeps the user's third review waiting after its check while the user
// opts out, for longer than the bound: it must not be sent.
func TestAWishWhileAPacedSendWaitsAfterItsCheck(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	jid := "5511900000042@s.whatsapp.net"
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: &jid})
	queueReviews(t, pool, user, jid, 4)

	var mu sync.Mutex
	var wished time.Time
	held := make(chan struct{})
	requests := 0
	bot := webhooktest.New(t, func(conn *net.TCPConn, req webhooktest.Request, done <-chan struct{}) {
		mu.Lock()
		requests++
		second := requests == 2
		mu.Unlock()
		if second {
			// The second review's write is recorded and the gate let go:
			// take it, so that the third review, once checked, waits.
			release := fixture.HoldFloor(t, pool, "webhook")
			go func() {
				defer close(held)
				defer release()
				for deadline := time.Now().Add(30 * time.Second); fixture.WaitingOnLocks(t, pool) == 0; {
					if time.Now().After(deadline) {
						t.Error("the third review never waited at the floor gate")
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				fixture.BotOptOut(t, pool, user, "keyword")
				mu.Lock()
				wished = time.Now()
				mu.Unlock()
				time.Sleep(wishBound + 100*time.Millisecond) // the fault: the send held past the bound
			}()
		}
		webhooktest.OK()(conn, req, done)
	})
	qenv := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.URL)
	res := cmdtest.Run(t, binary(t), qenv, "--send-interval", "100ms")
	<-held
	if res.Code != 0 {
		t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if late := lateRequests(bot.Requests(), user, wished); len(late) > 0 {
		t.Errorf("requests started later than %s after the user's opt-out: %v", wishBound, late)
	}
	for key, want := range map[string]string{user + ":r1": "sent", user + ":r2": "sent", user + ":r3": "cancelled", user + ":r4": "cancelled"} {
		if m := fixture.MessageByKey(t, pool, key); m.Status != want {
			t.Errorf("%s: %s, want %s", key, m.Status, want)
		}
	}
}
