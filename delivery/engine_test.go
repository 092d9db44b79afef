package delivery_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// Issue 14, item 2: a pending message whose message_params is not an object
// of strings made every run exit 1 ("can't scan into dest[4]") and left its
// whole claimed batch processing for good. Each bad row must fail alone,
// saying which field was wrong, and the rest be delivered.
func TestPoisonRowsFailAloneAndTheRestIsDelivered(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	rcv := newReceiver(t, 200)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	good := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	number := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	setParams(t, pool, number, `{"count": 3}`)
	bad := map[string]string{ // params → what the error must say
		`[1, 2]`:                 "message_params is a JSON array",
		`"three"`:                "message_params is a JSON string",
		`true`:                   "message_params is a JSON boolean",
		`{"count": {"n": 3}}`:    `message_params."count" is a JSON object`,
		`{"count": ["3"]}`:       `message_params."count" is a JSON array`,
		`{"count": false}`:       `message_params."count" is a JSON boolean`,
		`{"count": null}`:        `message_params."count" is null`,
		`{"count": "3", "x": 1}`: "", // renders: a number is its JSON text
	}
	ids := map[string]string{}
	for params := range bad {
		id := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
		setParams(t, pool, id, params)
		ids[params] = id
	}

	var logs bytes.Buffer
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1,
		Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := p.Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v; want the run to complete with the bad rows failed", err)
	}
	for _, id := range []string{good, number, ids[`{"count": "3", "x": 1}`]} {
		if r := rowOf(t, pool, id); r.Status != "sent" {
			t.Errorf("good message %s: %+v, want sent", id, r)
		}
	}
	for params, want := range bad {
		if want == "" {
			continue
		}
		r := rowOf(t, pool, ids[params])
		if r.Status != "failed" || r.RetryCount != 0 || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, want) {
			t.Errorf("params %s: %+v, want failed at once with an error saying %q", params, r, want)
		}
	}
	if sum.Failed != 7 || sum.Invalid != 7 || sum.Sent != 3 {
		t.Errorf("summary %+v, want 3 sent, 7 failed, 7 of them invalid", sum)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "processing"}); n != 0 {
		t.Errorf("%d messages left processing", n)
	}
}

func setParams(t *testing.T, db fixture.DB, id, params string) {
	t.Helper()
	fixture.SetMessages(t, db, fixture.MessageChange{ID: id, Params: params})
}

// Issue 14, item 6: after `migrate down` then `up`, in-flight messages came
// back processing with claimed_until NULL, which recovery never matched.
func TestAProcessingRowWithoutADeadlineIsRecovered(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	rcv := newReceiver(t, 200)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	id := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "processing", time.Now().Add(-time.Minute))
	fixture.SetMessages(t, pool, fixture.MessageChange{ID: id, NoClaim: true})
	sum := run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1})
	if r := rowOf(t, pool, id); r.Status != "sent" || sum.Recovered != 1 {
		t.Errorf("message %+v, summary %+v: want it recovered and sent", r, sum)
	}
}

// Issue 14, item 7: a receiver answering 400 with a body quoting the text
// put that text into the error log line and error_message.
func TestProviderBodyTextNeverReachesLogsOrRows(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	const quoted = "Parabéns pela semana"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"cannot deliver `+quoted+`, 2 transações"}`)
	}))
	defer srv.Close()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	id := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	var logs bytes.Buffer
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{Transport: webhook(t, srv.URL, ""), SendInterval: -1,
		Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := rowOf(t, pool, id)
	if r.Status != "failed" || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "HTTP 400") {
		t.Fatalf("message %+v, want failed with the status", r)
	}
	for what, s := range map[string]string{"error_message": *r.ErrorMessage, "log": logs.String()} {
		if strings.Contains(s, "Parab") || strings.Contains(s, "transa") {
			t.Errorf("%s carries the provider's body text: %s", what, s)
		}
	}
}

// Issue 14, item 4: the pacing UPDATE had no WHERE transport = …, so one
// transport's pace moved every other's; and a paced send held a row lock
// and a transaction across the HTTP call. While a paced send is in flight,
// nothing may be locked, and other transports' pace must be untouched.
func TestPacingHoldsNoLockDuringASendAndIsPerTransport(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	fixture.Pacing(t, pool, "log", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	arrived, release := make(chan struct{}, 10), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	for range 2 {
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	}
	done := make(chan delivery.ProcessSummary)
	go func() {
		done <- run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, srv.URL, ""), SendInterval: 20 * time.Millisecond})
	}()
	<-arrived
	// A send is in flight. Another connection can lock the pacing rows at
	// once, and no backend of the database sits in an open transaction.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lockErr := fixture.TryLockPacing(ctx, tx)
	_ = tx.Rollback(ctx)
	var pgErr *pgconn.PgError
	if errors.As(lockErr, &pgErr) && pgErr.Code == "55P03" {
		t.Errorf("the pacing row is locked during the HTTP call")
	} else if lockErr != nil {
		t.Fatal(lockErr)
	}
	// A transaction held across the call stays open while the call is
	// held. Others end on their own: a worker's recovery of abandoned
	// claims is a transaction of two statements, and a loaded machine
	// showed it open between them at this instant (issue 60's suite run).
	// So a moment with none open must come while the call is held.
	if idle, none := fixture.PollFor(10*time.Second, func() (int, bool) {
		n := fixture.IdleInTransaction(t, pool)
		return n, n == 0
	}); !none {
		t.Errorf("%d backends are idle in a transaction all through the HTTP call", idle)
	}
	close(release)
	if sum := <-done; sum.Sent != 2 {
		t.Errorf("summary %+v, want 2 sent", sum)
	}
	logNext := fixture.PacingOf(t, pool, "log").NextSendAt
	if !logNext.Equal(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("the webhook's pace moved the log transport's to %s", logNext)
	}
}

// Issue 14, item 4: a paced process ran one worker, so its throughput was
// 1/(latency + interval). Paced runs must keep up to Workers sends in
// flight, their starts still spaced by the interval.
func TestPacedSendsOverlapUpToTheWorkers(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	const interval = 100 * time.Millisecond
	var (
		mu             sync.Mutex
		starts         []time.Time
		inFlight, peak atomic.Int32
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(500 * time.Millisecond) // the provider's latency
		inFlight.Add(-1)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	for range 24 {
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	}
	sum := run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, srv.URL, ""), SendInterval: interval, Workers: 8})
	if sum.Sent != 24 {
		t.Fatalf("summary %+v, want 24 sent", sum)
	}
	if p := peak.Load(); p < 4 {
		t.Errorf("at most %d sends were in flight at once, want several (8 workers, 500 ms each, one start per 100 ms)", p)
	}
	fixture.CheckPace(t, starts, interval)
}

// Issue 14, item 5: when the receiver reset a reused connection, Go's HTTP
// client resent the request 1 ms later, inside the same paced turn (25 gaps
// under 400 ms with a 500 ms interval). Since issue 55 the client resends
// nothing on its own (transport.noReplay): every resend is the engine's,
// after its own check and pace slot, and keeps the pace.
func TestResendsAfterAResetKeepThePace(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	const interval = 100 * time.Millisecond
	recv := newResettingReceiver(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	for range 6 {
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	}
	run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, recv.url, ""), SendInterval: interval, Workers: 1,
		RetryBase: time.Millisecond})
	starts := recv.arrivals()
	if len(starts) < 8 {
		t.Fatalf("the receiver saw %d requests, want resends after its resets", len(starts))
	}
	fixture.CheckPace(t, starts, interval)
	if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "sent"}); n != 6 {
		t.Errorf("%d of 6 messages sent", n)
	}
}

// resettingReceiver keeps connections alive, answers the first request on
// each connection, and resets the connection after reading the second, so
// the client's next request travels on a reused connection that dies.
type resettingReceiver struct {
	url   string
	mu    sync.Mutex
	times []time.Time
}

func newResettingReceiver(t *testing.T) *resettingReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &resettingReceiver{url: "http://" + ln.Addr().String() + "/hook"}
	var (
		wg    sync.WaitGroup
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		for _, c := range conns { // idle keep-alive connections
			c.Close()
		}
		r.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			conns = append(conns, c)
			r.mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					r.mu.Lock()
					r.times = append(r.times, time.Now())
					r.mu.Unlock()
					if n == 1 {
						c.(*net.TCPConn).SetLinger(0)
						return // reset
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				}
			})
		}
	})
	return r
}

func (r *resettingReceiver) arrivals() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.times...)
}

// Fencing: an outcome is recorded only while its claim is still held. When
// another process took the claim over mid-send (here: a second connection
// rewrites the holder), the old holder must not overwrite it.
func TestAnOutcomeIsNotRecordedForALostClaim(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	id := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	done := make(chan delivery.ProcessSummary)
	go func() {
		done <- run(t, pool, delivery.ProcessorConfig{Transport: webhook(t, srv.URL, ""), SendInterval: -1})
	}()
	<-arrived
	fixture.SetMessages(t, pool, fixture.MessageChange{ID: id, ClaimedBy: "another-process", ClaimedUntil: time.Now().Add(time.Hour)})
	close(release)
	sum := <-done
	m := fixture.MessageByID(t, pool, id)
	status, holder := m.Status, m.ClaimedBy
	if status != "processing" || holder == nil || *holder != "another-process" {
		t.Errorf("message is %s held by %v, want it left to the process that holds its claim", status, holder)
	}
	if sum.ClaimsLost != 1 {
		t.Errorf("summary %+v, want the lost claim counted", sum)
	}
}

var _ transport.Transport = (*fakeTransport)(nil)

// A connection reset after the Cloud API read the request leaves the send
// in doubt: the message may have been delivered, and the Cloud API cannot
// drop a repeat. It fails as "outcome unknown" instead of being retried;
// a refused connection (nothing written) is retried as before.
func TestAFailureAfterTheRequestWasWrittenIsNotRetriedOnTheCloudAPI(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	var requests atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // the run's read of the number's health, not a send
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		requests.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close() // reset, after reading the whole request
	}))
	defer api.Close()
	wa, err := transport.NewWhatsApp(transport.WhatsAppConfig{
		BaseURL: api.URL, PhoneNumberID: "1234567890", AccessToken: "tok",
		Templates: map[string]transport.WhatsAppTemplate{
			fixture.WeeklyReview.CatalogKey: {Name: "weekly_review_v1", Language: map[string]string{"pt-BR": "pt_BR"}, Params: []string{"count"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	id := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	sum := run(t, pool, delivery.ProcessorConfig{Transport: wa, SendInterval: -1, RetryBase: time.Millisecond})
	r := rowOf(t, pool, id)
	if r.Status != "failed" || r.RetryCount != 0 || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "outcome unknown") {
		t.Errorf("message %+v, want failed at once with outcome unknown", r)
	}
	if !fixture.Deref(r.InDoubt) {
		t.Error("the message is not marked in_doubt: the daily job would not count its goodbye as delivered")
	}
	if n := requests.Load(); n != 1 || sum.Failed != 1 {
		t.Errorf("the Cloud API got %d requests (summary %+v), want 1", n, sum)
	}
}

// A due message whose row another transaction holds locked (the bot, say)
// is skipped, not waited for: the run delivers the rest and ends, and the
// locked message stays pending for a later run. (With the lock held, the
// run used to spin: the claim skipped the row, and the row was always due.)
func TestALockedDueRowIsSkippedNotWaitedFor(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	rcv := newReceiver(t, 200)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	locked := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Hour))
	for range 3 {
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	}
	bot, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Rollback(ctx)
	fixture.LockMessage(t, bot, locked)
	runCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1,
		Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := p.Run(runCtx)
	if err != nil || runCtx.Err() != nil {
		t.Fatalf("Run: %v (context: %v); want it to end by itself", err, runCtx.Err())
	}
	if sum.Sent != 3 || rowOf(t, pool, locked).Status != "pending" {
		t.Errorf("summary %+v, locked message %+v; want the 3 others sent and it left pending", sum, rowOf(t, pool, locked))
	}
}

// A shutdown (SIGTERM cancels the run's context) that lands while a
// statement is waiting is no failure: seen under load, queue-process exited
// 1 with "claim messages: context canceled" or "settle abandoned claims:
// context canceled" after a SIGTERM. Here the bot holds user_profiles
// locked, so every worker's claim (which reads the user's profile) waits
// until the run is cancelled: the run must end promptly, without an error,
// with nothing claimed.
func TestAShutdownWhileAClaimWaitsIsNoFailure(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	rcv := newReceiver(t, 200)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	for range 3 {
		queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	}
	bot, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Rollback(ctx) //nolint:errcheck // the test's end
	fixture.LockProfiles(t, bot)
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, ""), SendInterval: -1,
		Workers: 2, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, shutdown := context.WithCancel(ctx)
	type result struct {
		sum delivery.ProcessSummary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := p.Run(runCtx)
		done <- result{sum, err}
	}()
	// A claim waits for the lock (reading the profile, it cannot even be
	// planned).
	for deadline := time.Now().Add(10 * time.Second); ; {
		if fixture.WaitingLocks(t, bot, "user_profiles") > 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("Run ended before the shutdown: %+v, %v", r.sum, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no claim waiting for the lock after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	shutdown()
	select {
	case r := <-done:
		if r.err != nil {
			t.Errorf("Run after a shutdown: %v, want no error", r.err)
		}
		if r.sum.Sent != 0 {
			t.Errorf("sent %d, want none (every claim was waiting)", r.sum.Sent)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end within 5 s of the shutdown")
	}
	if err := bot.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if processing := fixture.CountMessages(t, pool, fixture.Messages{Status: "processing"}); processing != 0 {
		t.Errorf("%d messages left claimed after the shutdown, want none", processing)
	}
}
