package main_test

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/arrivals"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// The pace's floor gate under its own faults (issue 59's last stop: "Not
// tested: a holder killed or stopped while holding it, or a write that
// never completes"). Each test runs queue-process binaries on one webhook
// at 200 ms and checks, as the kernel stamps the arrivals, that no two
// requests come closer than the interval less the floor's tolerance, that
// every message is sent, and that no key reaches the bot twice.
const (
	faultInterval  = 200 * time.Millisecond
	faultTolerance = 20 * time.Millisecond
	faultMessages  = 16 // 4 claimed by each of three processes (one worker each), 4 left
)

// floorFaultRun is the queue, the bot and the binaries' settings of one
// test.
type floorFaultRun struct {
	pool *pgxpool.Pool
	bot  *bot
	env  []string
	args []string
}

func newFloorFaultRun(t *testing.T, b *bot, env ...string) *floorFaultRun {
	t.Helper()
	pool, url := pgtest.NewPool(t)
	queueMessages(t, pool, faultMessages)
	return &floorFaultRun{pool: pool, bot: b,
		env:  cmdtest.Env(append([]string{"DATABASE_URL=" + url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL=" + b.server.URL}, env...)...),
		args: []string{"--send-interval", faultInterval.String(), "--workers", "1", "--max-duration", "40s", "--output", "json"}}
}

func (f *floorFaultRun) start(t *testing.T) *queueRun {
	t.Helper()
	return startQueue(t, f.env, f.args...)
}

// holderStopped lines three processes up at the gate, which the test
// holds, the holder first; puts the last write 0.7 s ahead and lets the
// gate go, so the holder's first request waits 0.9 s there, holding it;
// and stops the holder in that wait with SIGSTOP, before its write, the
// two others waiting. It returns the stopped holder, its server process,
// when it was stopped and the two others.
func (f *floorFaultRun) holderStopped(t *testing.T) (holder *queueRun, pid int, stopped time.Time, others []*queueRun) {
	t.Helper()
	release := fixture.HoldFloor(t, f.pool, "webhook")
	holder = f.start(t)
	pid = fixture.WaitFloor(t, f.pool, "webhook", time.Minute, "the holder waiting",
		func(g fixture.FloorGate) bool { return g.Waiting == 1 }).Waiter
	others = []*queueRun{f.start(t), f.start(t)}
	fixture.WaitFloor(t, f.pool, "webhook", time.Minute, "three waiting", func(g fixture.FloorGate) bool { return g.Waiting == 3 })
	fixture.FloorAhead(t, f.pool, "webhook", 700*time.Millisecond)
	release() // the first in line takes it
	fixture.WaitFloor(t, f.pool, "webhook", 5*time.Second, "held by the holder",
		func(g fixture.FloorGate) bool { return g.Holder == pid })
	signal(t, holder, syscall.SIGSTOP)
	stopped = time.Now()
	if g := fixture.Floor(t, f.pool, "webhook"); g.Holder != pid || g.Waiting != 2 {
		t.Fatalf("the holder went through the gate before it was stopped (%+v, was %d): the test must catch it in its wait", g, pid)
	}
	if _, keys := f.bot.received(); len(keys) != 0 {
		t.Fatalf("the bot got %d requests while the stopped holder held the gate", len(keys))
	}
	return holder, pid, stopped, others
}

func signal(t *testing.T, r *queueRun, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v", sig, err)
	}
}

// finished waits for r's exit and returns its result.
func finished(t *testing.T, r *queueRun) cmdtest.Result {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatalf("the run did not exit within a minute: %s", lastLines(r.stderr.String(), 3))
	}
	return cmdtest.Result{Code: r.code, Stdout: r.stdout.String(), Stderr: r.stderr.String()}
}

// check checks the end: every message sent, each key once at the bot, and
// no two arrivals closer than the floor.
func (f *floorFaultRun) check(t *testing.T) {
	t.Helper()
	if n := fixture.CountMessages(t, f.pool, fixture.Messages{Status: "sent"}); n != faultMessages {
		t.Errorf("%d of %d messages sent; statuses %v", n, faultMessages, statusCounts(t, f.pool))
	}
	times, keys := f.bot.received()
	if distinct := len(slices.Compact(slices.Sorted(slices.Values(keys)))); len(keys) != faultMessages || distinct != faultMessages {
		t.Errorf("the bot got %d requests of %d keys; want each of the %d once", len(keys), distinct, faultMessages)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	least := time.Duration(1 << 62)
	for i := 1; i < len(times); i++ {
		gap := times[i].Sub(times[i-1])
		least = min(least, gap)
		if gap < faultInterval-faultTolerance {
			t.Errorf("requests %d and %d arrived %s apart, under the floor (%s less %s)", i, i+1, gap, faultInterval, faultTolerance)
		}
	}
	t.Logf("%d arrivals, the least gap %s", len(times), least)
}

// A holder killed -9 while it holds the gate, before its write: the
// others, waiting for the gate, go on as soon as its connection is gone;
// its claimed messages, whose requests it never wrote, wait for their
// claim to run out and are then sent, once, under their keys.
func TestPaceFloorHoldsWhenItsHolderIsKilled(t *testing.T) {
	t.Parallel()
	f := newFloorFaultRun(t, newBot(t, false))
	holder, _, _, others := f.holderStopped(t)
	signal(t, holder, syscall.SIGKILL)
	killed := time.Now()
	<-holder.done
	for _, r := range others {
		queueSummary(t, finished(t, r))
	}
	times, _ := f.bot.received()
	if len(times) == 0 {
		t.Fatal("the others sent nothing after the holder was killed")
	}
	t.Logf("the first request after the kill came %s after it", slices.MinFunc(times, time.Time.Compare).Sub(killed))
	left := fixture.CountMessages(t, f.pool, fixture.Messages{Status: "processing"})
	if left == 0 {
		t.Fatal("the killed holder left no claim behind")
	}
	fixture.ExpireClaims(t, f.pool) // its lease runs out
	queueSummary(t, cmdtest.Run(t, binary(t), f.env, f.args...))
	f.check(t)
}

// A holder stopped (SIGSTOP) while it holds the gate, before its write,
// until the server ends its transaction (idle_in_transaction_session_timeout,
// 5 s), then resumed right after another process's request: the others
// wait for the server, not forever, and the resumed process must not write
// a request then, its gate gone (on the code before the fix it did, a few
// milliseconds after the other's).
func TestPaceFloorHoldsWhenItsHolderIsStoppedPastItsTransaction(t *testing.T) {
	t.Parallel()
	f := newFloorFaultRun(t, newBot(t, false))
	holder, pid, stopped, others := f.holderStopped(t)
	fixture.WaitFloor(t, f.pool, "webhook", 15*time.Second, "the stopped holder's gate ended",
		func(g fixture.FloorGate) bool { return g.Holder != pid })
	waited := time.Since(stopped)
	if _, ok := fixture.PollFor(15*time.Second, func() (int, bool) { _, k := f.bot.received(); return len(k), len(k) > 0 }); !ok {
		t.Fatal("the others sent nothing once the stopped holder's gate ended")
	}
	signal(t, holder, syscall.SIGCONT)
	t.Logf("the others waited %s for the stopped holder's gate", waited)
	if waited > 8*time.Second {
		t.Errorf("the others waited %s for a stopped holder; want about 5 s (idle_in_transaction_session_timeout)", waited)
	}
	res := finished(t, holder)
	queueSummary(t, res)
	for _, r := range others {
		queueSummary(t, finished(t, r))
	}
	if !strings.Contains(res.Stderr, "not written in time for the pace's floor gate") {
		t.Errorf("the resumed holder did not say it let its request go: %s", lastLines(res.Stderr, 5))
	}
	f.check(t)
}

// A request whose write does not start within the gate's cap (a second):
// the receiver takes the connection and holds its TLS handshake until
// another process's request arrived, so the request could only be written
// then, after the gate was let go. The gate goes at the cap, the others go
// on, and the late request must not be written (on the code before the
// fix it was, right after the other's): its message goes back to the
// queue and is sent later, once.
func TestPaceFloorHoldsWhenAWriteDoesNotStartInTime(t *testing.T) {
	t.Parallel()
	b, hold, certs := newStallingTLSBot(t)
	f := newFloorFaultRun(t, b, "SSL_CERT_FILE="+certs)
	runs := []*queueRun{f.start(t), f.start(t)} // whichever connects first is held
	select {
	case <-hold.held:
	case <-time.After(time.Minute):
		t.Fatalf("no connection came to the receiver: %s", lastLines(runs[0].stderr.String(), 3))
	}
	held := time.Now()
	if _, ok := fixture.PollFor(time.Minute, func() (int, bool) { _, k := b.received(); return len(k), len(k) > 0 }); !ok {
		t.Fatal("no other request came while one connection's handshake was held: the gate was not let go")
	}
	hold.let()
	t.Logf("the other process's first request came %s after the handshake was held", time.Since(held))
	said := false
	for _, r := range runs {
		res := finished(t, r)
		queueSummary(t, res)
		// The gate's cap, or, sooner, the check's (the wish bound,
		// sendcheck.go): either way the request was let go unwritten.
		said = said || strings.Contains(res.Stderr, "not written in time for")
	}
	if !said {
		t.Error("neither process said it let its request go")
	}
	f.check(t)
}

// stallHold holds the reads of the first connection accepted until let
// go: a TLS handshake on it hangs, and its request is not written.
type stallHold struct {
	net.Listener
	armed    atomic.Bool
	held     chan struct{} // closed when the first connection's first read waits
	released chan struct{}
	once     sync.Once
}

func (s *stallHold) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil || !s.armed.CompareAndSwap(true, false) {
		return c, err
	}
	return &stalledConn{Conn: c, s: s}, nil
}

func (s *stallHold) let() { s.once.Do(func() { close(s.released) }) }

type stalledConn struct {
	net.Conn
	s    *stallHold
	once sync.Once
}

func (c *stalledConn) Read(p []byte) (int, error) {
	c.once.Do(func() { close(c.s.held); <-c.s.released })
	return c.Conn.Read(p)
}

func (c *stalledConn) NetConn() net.Conn { return c.Conn }

// newStallingTLSBot is newBot over HTTPS (HTTP/1.1), its first connection
// held (stallHold); certs is a file of its certificate, for SSL_CERT_FILE.
func newStallingTLSBot(t *testing.T) (*bot, *stallHold, string) {
	t.Helper()
	b := &bot{arrived: make(chan struct{}, 1000), hold: make(chan struct{})}
	b.server = httptest.NewUnstartedServer(http.HandlerFunc(b.serve))
	hold := &stallHold{Listener: arrivals.Listener(b.server.Listener), held: make(chan struct{}), released: make(chan struct{})}
	hold.armed.Store(true)
	b.server.Listener = hold
	b.server.Config.ConnContext = arrivals.ConnContext
	b.server.StartTLS()
	t.Cleanup(func() {
		hold.let()
		b.server.CloseClientConnections()
		b.server.Close()
	})
	certs := filepath.Join(t.TempDir(), "bot.pem")
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.server.Certificate().Raw})
	if err := os.WriteFile(certs, pemCert, 0o600); err != nil {
		t.Fatal(err)
	}
	return b, hold, certs
}
