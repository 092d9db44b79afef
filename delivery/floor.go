package delivery

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http/httptrace"
	"os"
	"sync"
	"sync/atomic"
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
//   - right before the request, it promises (floor_promise.sql, committed
//     on a connection of its own, and only while the gate is still its
//     own) that the request starts within floorHold: last_start_at becomes
//     that instant, and the request's connection refuses a write after it
//     (a write deadline, which Go's poller checks right before the write
//     system call);
//   - once the request is written (httptrace's WroteRequest, or the
//     transport's Send returning: the log transport writes nothing), or
//     floorHold after the promise, past which it cannot be, the write's
//     instant is recorded (floor_record.sql) and the gate let go.
//     WroteRequest comes when the request is in the connection's buffer:
//     a write system call later than floorFlush after it is refused.
//
// The next request's wait is read after that commit, and the instant is
// recorded after the write, so two writes are at least the interval apart
// on the database's clock, whatever the processes' scheduling, and no
// second holds more writes than the rate; the floor's tolerance is the
// network's and the receiver's. (A gate at the interval less 10 ms, to let
// a delayed pace catch up, kept no more of the rate under load, and let
// one more request than the rate into a second.)
//
// The gate's own faults. A holder killed lets the gate go with its
// connection; if it had written, its promise stands where its record was
// lost. One stopped (SIGSTOP) or gone quiet is ended by the server after
// floorIdle (idle_in_transaction_session_timeout); resumed, it writes
// nothing unless it promised before the stop and writes before its
// promise runs out: a pass older than floorPassLife promises nothing, the
// promise is made only while the server still holds the gate for it, and
// a write after the promise's instant is refused. A request whose write
// does not start within floorHold of its promise (a connection or a TLS
// handshake that hangs) is never written: the message goes back to the
// queue unsent (errFloorLost).
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
	// floorHold is how long after its promise a request may start to be
	// written: the longest the gate waits for the write, and the write
	// deadline of the request's connection.
	floorHold = time.Second
	// floorFlush is how long after WroteRequest (the request in the
	// connection's buffer) its write system call may come: well under
	// floorTolerance, as the write's instant is recorded from
	// WroteRequest.
	floorFlush = 10 * time.Millisecond
	// floorIdle is how long the server lets a holder of the gate be idle
	// in its transaction before it ends its session, and the gate with it.
	floorIdle = "5s"
	// floorPassLife is how long after the statement that took the gate a
	// pass may still promise a write: a second under floorIdle, so the
	// server cannot have ended the gate's transaction yet.
	floorPassLife = 4 * time.Second
)

// errFloorLost is a pass's answer when its request may not be written: the
// gate is no longer surely its own (the process was stopped, or the
// server ended the gate's transaction), or the write did not start within
// floorHold of the promise. Nothing of the request was written.
var errFloorLost = errors.New("the pace's floor gate was lost before the request was written")

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
	g      *floorGate
	conn   *pgxpool.Conn
	holder int       // the server process of the gate's transaction (floor_wait.sql)
	from   time.Time // when the statement that took the gate was sent
	once   sync.Once
	wrote  chan struct{} // closed at the write, or when Send returned
	// writeLimit: the request is written before its until, or not at all
	// (the promise's instant).
	writeLimit
}

// enter waits until a request on the transport may be written and returns
// the gate's hold: pass.promise readies it, pass.sending traces the send,
// pass.sent follows it; pass.leave lets the gate go when no request
// follows. A wait past notAfter (not zero) is not waited:
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
		from := time.Now() // the server's idle timer starts after this
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
			return &floorPass{g: g, conn: conn, holder: w.Holder, from: from, wrote: make(chan struct{})}, nil
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

// promise readies the pass for its request, right before it is written:
// it promises (floor_promise.sql) that the request starts within
// floorHold, and before writeBy if that is sooner (zero: no such bound),
// if the gate is still surely the pass's. errFloorLost: it is
// not; the request must not be written.
func (ps *floorPass) promise(ctx context.Context, writeBy time.Time) error {
	if time.Since(ps.from) > floorPassLife {
		return errFloorLost
	}
	sent := time.Now() // the promised instant is floorHold after the server's now, later than this
	tag, err := floorPromiseQuery.Exec(ctx, ps.g.pool, floorPromiseArgs{Hold: floorHold, Transport: ps.g.transport,
		Holder: ps.holder})
	switch {
	case err != nil:
		return fmt.Errorf("promise a request's write at the pace's floor gate: %w", err)
	case tag.RowsAffected() == 0:
		return errFloorLost
	}
	ps.until = sent.Add(floorHold)
	if !writeBy.IsZero() && writeBy.Before(ps.until) {
		ps.until = writeBy // the check's bound comes first (sendcheck.go)
	}
	return nil
}

// sending returns ctx traced for the send: the request's connection
// refuses a write after the promise's instant, and the gate records the
// write and goes as soon as the request is written, while the send waits
// for its answer. The caller calls sent once the transport's Send
// returned.
func (ps *floorPass) sending(ctx context.Context) context.Context {
	go ps.recordOnWrite(context.WithoutCancel(ctx))
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:              func(info httptrace.GotConnInfo) { ps.limit(info.Conn) },
		WroteRequest:         func(httptrace.WroteRequestInfo) { ps.tighten(); ps.signal() },
		GotFirstResponseByte: ps.unlimit,
	})
}

// tighten bounds what is left of the write: WroteRequest comes when the
// request is in the connection's buffer, right before the write system
// call, and the gate may record it and go before that call; a write later
// than floorFlush after it is refused.
func (ps *floorPass) tighten() {
	if c := ps.limited.Load(); c != nil {
		by := time.Now().Add(floorFlush)
		if ps.until.Before(by) {
			by = ps.until
		}
		_ = (*c).SetWriteDeadline(by)
	}
}

// sent says the transport's Send returned: whatever it wrote is written.
func (ps *floorPass) sent() { ps.signal() }

func (ps *floorPass) signal() { ps.once.Do(func() { close(ps.wrote) }) }

// recordOnWrite records the write (or the promise's instant without one:
// no write starts after it) and lets the gate go. If the record fails (the
// database is gone, or the process was stopped until the server ended the
// gate), the promise stands for it: it is logged.
func (ps *floorPass) recordOnWrite(ctx context.Context) {
	t := time.NewTimer(time.Until(ps.until))
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
		ps.g.log.Warn().Err(err).Msg("could not record a request's write at the pace's floor gate; the next waits from its promise")
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

// writeLimit refuses a request's write after until: the request's
// connection gets until as its write deadline, which Go's poller checks
// right before each write system call, so no byte of the request goes
// after it. The pace's floor gate bounds its writes so (the promise), and
// a paced send the time since its check (sendcheck.go).
type writeLimit struct {
	until time.Time
	// limited holds the request's connection while its write deadline is
	// until (not an HTTP/2 connection, which other requests share).
	limited atomic.Pointer[net.Conn]
}

// tracing returns ctx traced for a send bounded by w alone.
func (w *writeLimit) tracing(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:              func(info httptrace.GotConnInfo) { w.limit(info.Conn) },
		GotFirstResponseByte: w.unlimit,
	})
}

// limit gives c, the request's connection, until as its write deadline.
// An HTTP/2 connection, which the requests in flight share, is left
// alone.
func (w *writeLimit) limit(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
		return
	}
	if c.SetWriteDeadline(w.until) == nil {
		w.limited.Store(&c)
	}
}

// unlimit lifts the write deadline once the answer comes, before the
// connection goes back to the client's pool for other requests.
func (w *writeLimit) unlimit() {
	if c := w.limited.Load(); c != nil {
		_ = (*c).SetWriteDeadline(time.Time{})
	}
}

// refused reports whether a Send that ended in err never wrote its
// request: its connection refused the write, past until.
func (w *writeLimit) refused(err error) bool {
	return err != nil && w.limited.Load() != nil && errors.Is(err, os.ErrDeadlineExceeded)
}
