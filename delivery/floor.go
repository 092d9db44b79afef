package delivery

import (
	"context"
	"fmt"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// The pace's slot (pacing.go) keeps the rate; the floor gate keeps the
// least gap. A send's slot comes before its check, the start's statement
// and the machine's scheduling, none of them bounded: on a busy machine
// three processes at 100 ms wrote two requests 0 to 1 ms apart (issue
// 59). So, after every check, right before the request is written, a
// worker passes the transport's gate, on one clock, the database's:
//
//   - it takes the gate, a transaction-level advisory lock of the
//     transport (floor_lock.sql; one worker of a process at a time, the
//     others wait in the process, not on a connection each), and reads how
//     long since the last request's write (floor_wait.sql);
//   - if that is under the interval, it waits the rest, holding the
//     gate (or, for a wait over floorHoldWait, letting it go and taking it
//     again after): the send is delayed, never let go;
//   - else the request is written, and once it is (httptrace's
//     WroteRequest, or the transport's Send returning: the log transport
//     writes nothing), the write's instant is recorded
//     (floor_record.sql) and the gate let go.
//
// The next request's wait is read after that commit, and the instant is
// recorded after the write, so two writes are at least the interval apart
// on the database's clock, whatever the processes' scheduling, and no
// second holds more writes than the rate; the floor's tolerance is the
// network's and the receiver's. (A gate at the interval less 10 ms, to let
// a delayed pace catch up, kept no more of the rate under load, and let
// one more request than the rate into a second.) A holder
// killed lets the gate go with its connection; one stopped (SIGSTOP) or
// gone quiet is ended by the server after floorIdle
// (idle_in_transaction_session_timeout); a write that never completes is
// recorded after floorHold anyway, the send going on.
type floorGate struct {
	pool      *pgxpool.Pool
	transport string
	gap       time.Duration
	turn      chan struct{} // one worker of this process at the gate
	log       zerolog.Logger
}

const (
	// floorTolerance is the floor's documented tolerance: two requests on
	// one transport are at least the interval less this apart at the
	// receiver (docs/delivery.md, "Pacing: a shared rate").
	floorTolerance = 20 * time.Millisecond
	// floorHoldWait is the longest wait the gate is held through; a
	// longer one lets it go and takes it again after. Well under
	// floorIdle.
	floorHoldWait = time.Second
	// floorHold is the longest the gate waits for a request's write.
	floorHold = time.Second
	// floorIdle is how long the server lets a holder of the gate be idle
	// in its transaction before it ends its session, and the gate with it.
	floorIdle = "5s"
)

// newFloorGate returns the gate of a transport paced at interval, or nil
// when the interval is at or under floorTolerance: its floor is nothing to
// keep, and such a pace is not to be slowed by the gate's round trips.
func newFloorGate(pool *pgxpool.Pool, transport string, interval time.Duration, log zerolog.Logger) *floorGate {
	if interval <= floorTolerance {
		return nil
	}
	return &floorGate{pool: pool, transport: transport, gap: interval, turn: make(chan struct{}, 1),
		log: log}
}

// floorPass is a worker's hold of the gate, until its request is written.
type floorPass struct {
	g     *floorGate
	conn  *pgxpool.Conn
	once  sync.Once
	wrote chan struct{} // closed at the write, or when Send returned
}

// enter waits until a request on the transport may be written and returns
// the gate's hold: pass.sending traces the send, pass.sent follows it;
// pass.leave lets the gate go when no request follows. A wait past notAfter (not zero) is not waited:
// errNoSlotInTime.
func (g *floorGate) enter(ctx context.Context, notAfter time.Time) (*floorPass, error) {
	select {
	case g.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	pass, err := g.take(ctx, notAfter)
	if err != nil {
		<-g.turn
	}
	return pass, err
}

// take takes the gate once the gap since the last write has passed.
func (g *floorGate) take(ctx context.Context, notAfter time.Time) (*floorPass, error) {
	for {
		conn, err := g.pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("take the pace's floor gate: %w", err)
		}
		var w floorWaitRow
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(`SELECT set_config('idle_in_transaction_session_timeout', $1, true)`, floorIdle)
		b.Queue(lazyCommitSQL) // a lost record only leaves a gap
		floorLockQuery.QueueExec(b, floorLockArgs{Transport: g.transport})
		floorWaitQuery.QueueOne(b, floorWaitArgs{Gap: g.gap, Transport: g.transport}, &w)
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			conn.Release() // in a transaction still: the pool closes it
			return nil, fmt.Errorf("take the pace's floor gate: %w", err)
		}
		late := !notAfter.IsZero() && time.Now().Add(w.Wait).After(notAfter)
		if w.Wait <= floorHoldWait && !late && sleep(ctx, w.Wait) {
			// Waited holding the gate: nobody wrote meanwhile, and another
			// round trip to take it again would come on top of the wait.
			return &floorPass{g: g, conn: conn, wrote: make(chan struct{})}, nil
		}
		rbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		_, rbErr := conn.Exec(rbCtx, "ROLLBACK")
		cancel()
		conn.Release()
		switch {
		case late:
			return nil, errNoSlotInTime
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case rbErr != nil:
			return nil, fmt.Errorf("let the pace's floor gate go: %w", rbErr)
		}
		if !sleep(ctx, w.Wait) {
			return nil, ctx.Err()
		}
	}
}

// sending returns ctx traced for the send: the gate records the write and
// goes as soon as the request is written, while the send waits for its
// answer. The caller calls sent once the transport's Send returned.
func (ps *floorPass) sending(ctx context.Context) context.Context {
	go ps.recordOnWrite(context.WithoutCancel(ctx))
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { ps.signal() },
	})
}

// sent says the transport's Send returned: whatever it wrote is written.
func (ps *floorPass) sent() { ps.signal() }

func (ps *floorPass) signal() { ps.once.Do(func() { close(ps.wrote) }) }

// recordOnWrite records the write (or floorHold without one) and lets the
// gate go. If the record fails (the database is gone), the next request
// waits from the previous record only: it is logged.
func (ps *floorPass) recordOnWrite(ctx context.Context) {
	t := time.NewTimer(floorHold)
	defer t.Stop()
	select {
	case <-ps.wrote:
	case <-t.C:
	}
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	b := &pgx.Batch{}
	floorRecordQuery.QueueExec(b, floorRecordArgs{Transport: ps.g.transport})
	b.Queue("COMMIT")
	if err := ps.conn.SendBatch(ctx, b).Close(); err != nil {
		ps.g.log.Warn().Err(err).Msg("could not record a request's write at the pace's floor gate; the next may come sooner")
	}
	ps.release()
}

// leave lets the gate go when no request follows its pass.
func (ps *floorPass) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	_, _ = ps.conn.Exec(ctx, "ROLLBACK")
	ps.release()
}

func (ps *floorPass) release() {
	ps.conn.Release() // closed by the pool if still in the transaction
	<-ps.g.turn
}
