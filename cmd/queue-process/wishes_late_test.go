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
	// Which review waited at the gate is the machine's to say: on a loaded
	// one (issue 60's suite run) the third passed the gate before the
	// handler took it, and the fourth waited instead. Whichever it was, it
	// was checked before the opt-out and held past the bound: it and every
	// review after it are cancelled, and only those the bot got are sent.
	if sent, cancelled := checkRecords(t, pool, bot.Requests(), user); sent < 2 || cancelled < 1 {
		t.Errorf("%d reviews sent and %d cancelled; want the first two or three sent and the rest cancelled", sent, cancelled)
	}
}
