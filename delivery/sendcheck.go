package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// The send-time checks run twice: when a message is claimed (claim.sql,
// which cancels what is no longer wanted and defers what is due in the
// quiet hours), and again just before its send starts (recheck.sql, the
// same rules), because a claimed batch is sent one message after another
// and its last send may start seconds after the claim: in that time the
// user may answer the goodbye, come back or opt out (issue 42: unpaced,
// 482 of 7,835 goodbyes went to users who had answered up to 6 s before).
//
// Paced, a send waits for its slot anyway, and the check runs for that
// message alone, after the wait, right before the send. Unpaced, where one
// statement per send would cost the rate the batching buys, one check
// covers the next RecheckBatch messages of the batch, and is made again
// for a message whose check is older than RecheckAge: so a message's send
// starts at most RecheckAge after its user was last read, and within
// RecheckBatch sends of it.
const (
	RecheckBatch = 25
	RecheckAge   = 250 * time.Millisecond
)

// sendCheck re-checks one claimed batch's messages, in the order they are
// sent.
type sendCheck struct {
	p     *Processor
	batch []claimed
	size  int // messages one check covers: 1 paced, RecheckBatch unpaced
	// batch[from:to] were checked; at is when the statement was sent (the
	// users were read after it: a check is never younger than it says).
	from, to  int
	at        time.Time
	cancelled map[string]string // id → cancel_reason, of every check so far
}

func (p *Processor) sendCheck(batch []claimed) *sendCheck {
	size := RecheckBatch
	if p.pacer != nil {
		size = 1
	}
	return &sendCheck{p: p, batch: batch, size: size, cancelled: map[string]string{}}
}

// cancelReason reports why batch[i] is no longer wanted ("" when it still
// is), checking it again first unless a check young enough covered it.
// A message it reports is cancelled already, counted and its budget slot
// given back: it must not be sent.
func (c *sendCheck) cancelReason(ctx context.Context, i int) (string, error) {
	if i < c.from || i >= c.to || time.Since(c.at) > RecheckAge {
		if err := c.check(ctx, i); err != nil {
			return "", err
		}
	}
	return c.cancelled[c.batch[i].ID], nil
}

// check runs recheck.sql for the next size messages from batch[i].
func (c *sendCheck) check(ctx context.Context, i int) error {
	end := min(i+c.size, len(c.batch))
	ids := make([]string, 0, end-i)
	for _, m := range c.batch[i:end] {
		ids = append(ids, m.ID)
	}
	at := time.Now()
	var gone map[string]string
	err := c.p.onServer(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, _ := conn.Query(ctx, recheckSQL, sqlfile.Args{"ids": ids, "holder": c.p.holder, "kinds": sendRules})
		gone = map[string]string{} // a check cut short and tried again counts once
		var id, reason string
		_, err := pgx.ForEachRow(rows, []any{&id, &reason}, func() error {
			gone[id] = reason
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("check messages again before their send: %w", err)
	}
	// A message cancelled by an earlier check is no longer held, so a
	// later one does not return it: the reasons add up.
	c.from, c.to, c.at = i, end, at
	if len(gone) == 0 {
		return nil
	}
	var ms []claimed
	var cancelledIDs []string
	for _, m := range c.batch[i:end] {
		if reason, ok := gone[m.ID]; ok {
			c.cancelled[m.ID] = reason
			ms, cancelledIDs = append(ms, m), append(cancelledIDs, m.ID)
			c.p.tally.cancel(reason)
			log := c.p.messageLog(m)
			log.Info().Str("cancel_reason", reason).
				Msg("no longer wanted when about to be sent; cancelled")
		}
	}
	c.p.refund(cancelledIDs, ms)
	return nil
}
