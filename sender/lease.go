package sender

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// A claim is a lease: a message in flight is 'processing', held by one
// processor (claimed_by) until a deadline (claimed_until). The holder
// renews the claims it still works on (keepAlive), starts a send only while
// it holds the claim (the fencing check of start.sql, or leases.usable on
// the batched path), and records an outcome only for a claim it still holds
// (settle.sql). A claim whose holder stopped renewing it is abandoned, and
// recoverAbandoned settles it from the send ledger.

// claimed is a message this processor holds.
type claimed struct {
	transport.Delivery
	rawParams  *string // message_params as JSON text; nil for SQL NULL
	retryCount int
}

// leases tracks the deadline of every claim this processor holds, as far as
// it knows: a deadline counts from before the statement that set it was
// sent, so it is never later than the database's.
type leases struct {
	mu      sync.Mutex
	until   map[string]time.Time // by message id
	timeout time.Duration
}

func newLeases(timeout time.Duration) *leases {
	return &leases{until: map[string]time.Time{}, timeout: timeout}
}

// hold records that the claims on ids were set or renewed by a statement
// sent at from.
func (l *leases) hold(from time.Time, ids ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.until[id] = from.Add(l.timeout)
	}
}

// drop forgets claims that were settled, released or lost.
func (l *leases) drop(ids ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		delete(l.until, id)
	}
}

// held lists the claims to renew.
func (l *leases) held() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.until))
	for id := range l.until {
		ids = append(ids, id)
	}
	return ids
}

// usable reports whether a send of id may start now: the claim is held with
// at least a third of its timeout left. A renewal comes every third of
// the timeout, so a live processor is always well inside it; one whose
// renewals fail stops starting sends long before another could take over.
func (l *leases) usable(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	until, ok := l.until[id]
	return ok && time.Until(until) > l.timeout/3
}

// claim takes up to ClaimBatch due pending messages (claim.sql). In the
// same statement, messages no longer wanted are cancelled and messages due
// inside the quiet hours deferred; it counts both.
func (p *Processor) claim(ctx context.Context) ([]claimed, error) {
	from := time.Now()
	args := pgx.NamedArgs{
		"holder":         p.holder,
		"claim_timeout":  p.cfg.ClaimTimeout,
		"batch":          p.cfg.ClaimBatch,
		"default_locale": DefaultLocale,
		"timezone":       p.cfg.Timezone,
		"quiet_start":    (*time.Duration)(nil),
		"quiet_end":      (*time.Duration)(nil),
	}
	if q := p.cfg.QuietHours; q.Set() {
		args["quiet_start"], args["quiet_end"] = q.Start, q.End
	}
	rows, err := p.pool.Query(ctx, p.claimSQL, args)
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	var (
		batch   []claimed
		verdict string
		m       claimed
		due     *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&verdict, &m.ID, &m.UserID, &m.Type, &m.Key, &m.rawParams, &m.Locale,
		&m.Destination, &m.DestinationJID, &m.IdempotencyKey, &m.retryCount, &due}, func() error {
		switch {
		case verdict == "claimed":
			m.Attempt = m.retryCount + 1
			batch = append(batch, m)
			p.leases.hold(from, m.ID)
		case verdict == "deferred":
			p.tally.deferred.Add(1)
		default:
			p.tally.cancel(strings.TrimPrefix(verdict, "cancelled:"))
		}
		m = claimed{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim messages: %w", err)
	}
	return batch, nil
}

// keepAlive renews this processor's claims every third of the claim
// timeout until ctx ends. A failed renewal is logged and tried again at the
// next tick; meanwhile leases.usable stops new sends on claims running out.
func (p *Processor) keepAlive(ctx context.Context) {
	tick := time.NewTicker(p.cfg.ClaimTimeout / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ids := p.leases.held()
		if len(ids) == 0 {
			continue
		}
		from := time.Now()
		rows, err := p.pool.Query(ctx, renewSQL, pgx.NamedArgs{
			"ids": ids, "holder": p.holder, "claim_timeout": p.cfg.ClaimTimeout,
		})
		var renewed []string
		if err == nil {
			renewed, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn().Err(err).Int("claims", len(ids)).Msg("could not renew claims; retrying")
			}
			continue
		}
		p.leases.hold(from, renewed...)
	}
}

// release hands claimed messages this processor has not sent back to the
// queue (release.sql).
func (p *Processor) release(ms []claimed) error {
	if len(ms) == 0 {
		return nil
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	defer p.leases.drop(ids...)
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	if _, err := p.pool.Exec(ctx, releaseSQL, pgx.NamedArgs{"ids": ids, "holder": p.holder}); err != nil {
		return fmt.Errorf("release claimed messages: %w", err)
	}
	return nil
}

// recoverAbandoned settles the messages whose claim was abandoned
// (recover.sql) and returns how many.
func (p *Processor) recoverAbandoned(ctx context.Context) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, recoverSQL, pgx.NamedArgs{
		"transport":    p.cfg.Transport.Name(),
		"deduplicates": p.cfg.Transport.Deduplicates(),
		"unknown":      ErrOutcomeUnknown.Error(),
	}).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("settle abandoned claims: %w", err)
	}
	if n > 0 {
		p.tally.recovered.Add(int64(n))
		p.log.Warn().Int("messages", n).Msg("settled messages whose claim was abandoned")
	}
	return n, nil
}
