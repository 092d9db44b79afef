package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Four queue-process runs with --claim-timeout 1s on a loaded machine
// stopped with "lease_lost" and one exited 1 with "settle abandoned claims:
// deadlock detected": the workers that found nothing to claim all ran the
// recovery at once, each one's UPDATE burying the late holders waited on
// their rows (and on one another's, in no fixed order), and the renewals
// queued behind them. A recovery must not wait on a holder's row that
// another transaction holds: a renewal in flight (the holder lives, its
// claims stay its own) or another recovery burying it. Two holders' leases
// ran out; one's row is locked by its renewal, not yet committed. The run
// settles the other's claim and sends it, without waiting, and leaves the
// renewing holder's claim alone.
func TestRecoveryNeverWaitsOnAHoldersRow(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	past := time.Now().Add(-time.Hour)
	dead := queue(t, pool, user, fixture.Goodbye.CatalogKey, "processing", past)
	renewing := queue(t, pool, user, fixture.Goodbye.CatalogKey, "processing", past)
	for holder, id := range map[string]string{"dead": dead, "renewing": renewing} {
		fixture.Holder(t, pool, holder, time.Now().Add(-time.Minute))
		fixture.SetMessages(t, pool, fixture.MessageChange{ID: id, ClaimedBy: holder, ClaimedUntil: time.Now().Add(time.Hour)})
	}
	renewal, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = renewal.Rollback(ctx) }()
	fixture.Holder(t, renewal, "renewing", time.Now().Add(time.Hour))

	rcv := newReceiver(t, 200)
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		sum delivery.ProcessSummary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := p.Run(ctx)
		done <- result{sum, err}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var res result
	waited := false
wait:
	for {
		select {
		case res = <-done:
			break wait
		case <-tick.C:
			if fixture.WaitingOnLocks(t, pool) == 0 {
				continue
			}
			// Waiting on the renewal: end it, so the run can finish.
			waited = true
			if err := renewal.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			res = <-done
			break wait
		}
	}
	if waited {
		t.Errorf("the run's recovery waited on the holder row a renewal held, until the renewal committed")
	}
	if res.err != nil {
		t.Fatalf("Run: %v", res.err)
	}
	if r := rowOf(t, pool, dead); r.Status != "sent" || res.sum.Recovered != 1 {
		t.Errorf("the dead holder's message: %+v, %d recovered; want it recovered and sent", r, res.sum.Recovered)
	}
	m := fixture.MessageByID(t, pool, renewing)
	if status, holder := m.Status, fixture.Deref(m.ClaimedBy); status != "processing" || holder != "renewing" {
		t.Errorf("the renewing holder's message is %s, claimed by %q; want still its claim (its holder lives)", status, holder)
	}
	if n := len(rcv.got()); n != 1 {
		t.Errorf("the receiver got %d requests, want 1", n)
	}
	if !waited {
		if err := renewal.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if fixture.HolderOf(t, pool, "renewing").Buried {
		t.Errorf("the renewing holder was buried")
	}
}
