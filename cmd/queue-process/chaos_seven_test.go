package main_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Issue 55's chaos run, every order at once: 400 goodbyes under a daily
// limit of 200, three queue-process binaries kept running as a cron
// platform would and killed -9 at 36 random moments, the bot's webhook
// down (503) for a while, PostgreSQL restarted under them. The bot keeps
// the receiver's contract (a key claimed before it sends, a repeat or a
// lookup never sent), forwards each message's delivery ack before it even
// answers, and all the while its users write back and opt out.
//
// How each message is checked, once the faults stop and the queue
// drains: the bot's own record of what it sent to WhatsApp is the truth.
// A message it sent was sent once (0 twice), and is recorded sent, with
// the id the bot answered and its delivery (0 sent messages recorded
// otherwise, 0 receipts lost, no receipt left waiting). A message it did
// not send is recorded cancelled (its user wrote or opted out) or pending
// on the budget, or, when a lookup's answer was lost to a kill, failed as
// outcome unknown; never sent or in flight (0 lost). No more users
// got a goodbye than the budget allows (0 over).
func TestChaosEveryOrderLosesNothing(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	pool, err := pgxpool.New(context.Background(), cluster.URL) // not the binaries' pool: the test's fixture, checks and the bot's side
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx := context.Background()
	const messages, limit = 400, 200
	users := goodbyesDue(t, pool, fixture.Now(t, pool), messages)
	bot := newDedupBot(t, 1<<30)
	bot.acks = pool

	// Paced at 25 ms, so that the sends span the faults: at 5 ms a quiet
	// machine sent all it could before the outage, and the outage, the
	// restart and most kills met processes with nothing left to do.
	env := cmdtest.Env("DATABASE_URL="+cluster.URL, "ENGAGEMENT_DAILY_LIMIT="+strconv.Itoa(limit))
	args := []string{"--transport", "webhook", "--webhook-url", bot.server.URL, "--send-interval", "25ms", "--workers", "4",
		"--claim-timeout", "1s", "--retry-base", "10ms", "--max-duration", "20s", "--output", "json"}

	// The bot's users: every 60 ms one writes back or says stop, 100 of
	// them at most. Uncounted (every 20 ms while the faults ran), a slow
	// machine's moves outran its sends: 235 of 400 users cancelled, none
	// left waiting on the budget, and the run "did not test much" (1 run of
	// 8 beside two CPU burners and a lint). 100 leave at least 300 wanted,
	// more than the limit of 200, however slow the sends.
	const maxMoves = 100
	moves := rand.New(rand.NewPCG(55, 55)) //nolint:gosec // seeded: the moves repeat from run to run
	stopMoves := make(chan struct{})
	var movers sync.WaitGroup
	movers.Go(func() {
		for range maxMoves {
			select {
			case <-stopMoves:
				return
			case <-time.After(60 * time.Millisecond): // moments for the moves, not a clock
			}
			user := users[moves.IntN(len(users))]
			if moves.IntN(3) == 0 {
				_, _ = activity.OptOut(ctx, pool, user, activity.SourceKeyword, activity.ConsentOptions{})
			} else {
				_, _ = activity.Fire(ctx, pool, user, sm.UserMessage, activity.FireOptions{})
			}
		}
	})

	killer := rand.New(rand.NewPCG(55, 7)) //nolint:gosec // seeded: the kills repeat from run to run
	var sentBeforeOutage, sentBeforeRestart int
	f := startFleet(t, 3, env, args...)
	fixture.PollFor(time.Minute, func() (int, bool) { n := len(bot.sentKeys(t)); return n, n >= 20 })
	for step := range 36 {
		time.Sleep(time.Duration(100+killer.IntN(150)) * time.Millisecond) // moments for the faults, not a clock
		f.kill(killer)
		switch step {
		case 8:
			sentBeforeOutage = len(bot.sentKeys(t))
			bot.setDown(http.StatusServiceUnavailable)
		case 14:
			bot.setDown(0)
		case 22:
			sentBeforeRestart = len(bot.sentKeys(t))
			cluster.Restart(t)
			pool.Reset()
		}
	}
	f.stop()
	close(stopMoves)
	movers.Wait()

	fixture.ExpireClaims(t, pool)
	drain(t, pool, env, args...)
	if left := bot.reack(); left != 0 {
		t.Fatalf("%d acks the database would not take", left)
	}

	sent := bot.sentKeys(t)
	type row struct {
		status, reason, pid string
		inDoubt             bool
	}
	rows := map[string]row{}
	var undelivered int
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{}) {
		key := m.Key()
		reason := m.CancelReason
		if reason == nil {
			reason = m.DeferredReason
		}
		rows[key] = row{status: m.Status, reason: fixture.Deref(reason), pid: fixture.Deref(m.ProviderMessageID),
			inDoubt: fixture.Deref(m.InDoubt)}
		if sent[key] && m.DeliveredAt == nil {
			undelivered++
		}
	}
	byOutcome := map[string]int{}
	var wrong []string
	for key, r := range rows {
		switch {
		case sent[key] && r.status == "sent" && r.pid == "wa."+key:
			byOutcome["sent"]++
		case !sent[key] && r.status == "cancelled" && (r.reason == "stale" || r.reason == "opted_out"):
			byOutcome["cancelled:"+r.reason]++
		case !sent[key] && r.status == "pending" && r.reason == "budget":
			byOutcome["waiting on the budget"]++
		case !sent[key] && r.status == "failed" && r.inDoubt:
			// No longer wanted, and its lookup's answer lost to a kill: the
			// next lookup hears that lookup's own trace, and nobody can say
			// whether it went out. Never sent again, never said unsent.
			byOutcome["outcome unknown"]++
		default:
			wrong = append(wrong, key[:8]+" sent by the bot "+strconv.FormatBool(sent[key])+", recorded "+r.status+" "+r.reason+" "+r.pid)
		}
	}
	kept := fixture.KeptReceipts(t, pool, "", "")
	t.Logf("%d kills, exits on their own by code %v; %d users got a goodbye; outcomes %v", f.kills, f.exits, len(sent), byOutcome)
	if len(wrong) > 0 {
		t.Errorf("%d messages recorded otherwise than the bot saw them: %s", len(wrong), strings.Join(wrong[:min(5, len(wrong))], "; "))
	}
	if len(sent) > limit {
		t.Errorf("%d users got a goodbye under a daily limit of %d", len(sent), limit)
	}
	if undelivered != 0 || kept != 0 {
		t.Errorf("%d sent messages without their delivery ack, %d acks still waiting for their send", undelivered, kept)
	}
	if byOutcome["sent"] < 100 || byOutcome["cancelled:stale"] == 0 || byOutcome["waiting on the budget"] == 0 {
		t.Errorf("outcomes %v: the run did not test much", byOutcome)
	}
	if sentBeforeRestart >= len(sent) || sentBeforeOutage >= sentBeforeRestart {
		t.Errorf("%d sent before the outage, %d before the restart, %d in all: the sends did not span the faults", sentBeforeOutage,
			sentBeforeRestart, len(sent))
	}
	if f.kills < 30 {
		t.Errorf("only %d kills", f.kills)
	}
	for code, n := range f.exits {
		if code != 0 && code != 1 {
			t.Errorf("%d processes exited %d on their own", n, code)
		}
	}
}
