package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// counter is a receiver that answers every request after a delay and
// counts the 2xx answers per Idempotency-Key: a key answered 2xx twice is a
// message delivered twice. While down, it answers status instead (0: the
// request is not answered at all: the connection is closed).
type counter struct {
	mu     sync.Mutex
	sent   map[string]int
	seen   int // requests, answered or not
	down   int
	delay  time.Duration
	server *httptest.Server
}

func newCounter(t *testing.T, delay time.Duration) *counter {
	c := &counter{sent: map[string]int{}, delay: delay}
	c.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(c.delay) // the receiver's own latency, not a clock
		c.mu.Lock()
		c.seen++
		down := c.down
		if down == 0 {
			c.sent[r.Header.Get("Idempotency-Key")]++
		}
		c.mu.Unlock()
		if down != 0 {
			w.WriteHeader(down)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(c.server.Close)
	return c
}

func (c *counter) setDown(status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = status
}

// delivered returns how many keys were answered 2xx, and how many 2xx
// answers went to a key already answered.
func (c *counter) delivered() (keys, repeats int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.sent {
		keys++
		repeats += n - 1
	}
	return keys, repeats
}

// processes runs n queue-process binaries side by side with args and
// returns their exit codes and stderr.
func processes(t *testing.T, n int, env []string, args ...string) ([]int, []string) {
	t.Helper()
	bin := binary(t)
	codes, logs := make([]int, n), make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res := cmdtest.Run(t, bin, env, args...)
			codes[i], logs[i] = res.Code, res.Stderr
		})
	}
	wg.Wait()
	return codes, logs
}

// Issue 22: one queue-process with --claim-timeout 1s over 20,000 messages
// exited 1 with "deadlock detected" (the renewal of every claim and the
// batched record updated the same rows in different orders), and two at 2s
// lost live claims to each other and sent 179 messages twice. A live
// process keeps its claims however short the timeout; no statement
// deadlocks; every message is answered 2xx exactly once.
func TestShortClaimTimeoutsNeitherDeadlockNorResend(t *testing.T) {
	t.Parallel()
	const messages = 6000
	for _, tc := range []struct {
		procs   int
		timeout string
	}{{1, "1s"}, {4, "1s"}, {2, "2s"}} {
		t.Run(fmt.Sprintf("%d processes, %s claims", tc.procs, tc.timeout), func(t *testing.T) {
			t.Parallel()
			pool, url := pgtest.NewPool(t)
			rcv := newCounter(t, 5*time.Millisecond)
			queueMessages(t, pool, messages)
			env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+rcv.server.URL)

			codes, logs := processes(t, tc.procs, env, "--send-interval", "0", "--claim-timeout", tc.timeout)
			for i, code := range codes {
				if code != 0 {
					t.Errorf("process %d: exit %d: %s", i, code, lastLines(logs[i], 3))
				}
			}
			keys, repeats := rcv.delivered()
			if keys != messages || repeats != 0 {
				t.Errorf("the receiver answered %d keys 2xx and %d repeats; want %d keys, no repeat", keys, repeats, messages)
			}
			if got := statusCounts(t, pool); got["sent"] != messages {
				t.Errorf("statuses %v, want all %d sent", got, messages)
			}
		})
	}
}

// Issue 22: with the webhook refusing connections (the bot being
// redeployed), all due messages were failed after 1 + 2 + 4 s of retries.
// An outage is not the messages' fault: the run stops at once, hands every
// claim back with its retries unspent, says so in its summary, and a run
// after the outage delivers everything once.
func TestAReceiverOutageLeavesMessagesPendingWithRetriesUnspent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int // 0: connection refused
	}{{"connection refused", 0}, {"503 from the gateway", http.StatusServiceUnavailable}, {"502 from the gateway", http.StatusBadGateway}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, url := pgtest.NewPool(t)
			rcv := newCounter(t, 0)
			queueMessages(t, pool, 200)
			target := rcv.server.URL
			if tc.status == 0 {
				target = "http://" + closedPort(t)
			} else {
				rcv.setDown(tc.status)
			}
			env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook")

			for run := range 3 { // the cron's runs during the outage
				res := cmdtest.Run(t, binary(t), append(env, "ENGAGEMENT_WEBHOOK_URL="+target), "--output", "json", "--send-interval", "0")
				if res.Code != 0 {
					t.Fatalf("run %d during the outage: exit %d: %s", run, res.Code, lastLines(res.Stderr, 3))
				}
				var sum struct {
					Stopped, Outage string
					Failed, Retried int
				}
				if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
					t.Fatalf("summary %q: %v", res.Stdout, err)
				}
				if sum.Stopped != "outage" || sum.Outage == "" || sum.Failed != 0 || sum.Retried != 0 {
					t.Errorf("run %d's summary %s; want stopped for an outage, nothing failed or retried", run, res.Stdout)
				}
				if !strings.Contains(res.Stderr, "receiver outage") {
					t.Errorf("run %d logged no outage warning", run)
				}
				got := statusCounts(t, pool)
				spent := fixture.SendFiguresOf(t, pool, time.Time{}).Retried
				if got["pending"] != 200 || spent != 0 {
					t.Fatalf("after run %d: %v, %d with retries spent; want all 200 pending, none spent", run, got, spent)
				}
			}

			rcv.setDown(0) // the bot is back
			res := cmdtest.Run(t, binary(t), append(env, "ENGAGEMENT_WEBHOOK_URL="+rcv.server.URL), "--send-interval", "0")
			if res.Code != 0 {
				t.Fatalf("run after the outage: exit %d: %s", res.Code, lastLines(res.Stderr, 3))
			}
			keys, repeats := rcv.delivered()
			if got := statusCounts(t, pool); got["sent"] != 200 || keys != 200 || repeats != 0 {
				t.Errorf("after the outage: %v, %d keys delivered, %d repeats; want 200 sent once each", got, keys, repeats)
			}
		})
	}
}

// A 503 for one message among answers that succeed is that message's
// failure, not an outage: it spends a retry and is delivered on it; the
// others are delivered and the run does not stop.
func TestA503ForOneMessageIsItsOwnFailure(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	var mu sync.Mutex
	first := ""
	answers := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		defer mu.Unlock()
		if first == "" {
			first = key
		}
		if key == first && answers[key] == 0 {
			answers[key]++
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		answers[key]++
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	queueMessages(t, pool, 20)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+srv.URL)

	res := cmdtest.Run(t, binary(t), env, "--output", "json", "--send-interval", "0", "--workers", "1", "--retry-base", "10ms")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, lastLines(res.Stderr, 3))
	}
	var sum struct {
		Stopped       string
		Sent, Retried int
	}
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Stopped != "" || sum.Sent != 20 || sum.Retried != 1 {
		t.Errorf("summary %s; want 20 sent, 1 retried, not stopped", res.Stdout)
	}
	if n := fixture.SendFiguresOf(t, pool, time.Time{}).SentOnRetry; n != 1 {
		t.Errorf("%d messages sent on their retry, want the one answered 503", n)
	}
}

// Issue 22: a paced run that got SIGTERM on a loaded machine exited 0 with
// messages still 'processing' (1 round in 8). The process exits only when
// each message it claimed is sent or pending again.
func TestSIGTERMReleasesEveryClaim(t *testing.T) {
	t.Parallel()
	const rounds = 10
	for _, tc := range []struct {
		name     string
		perRound int
		args     []string
	}{
		{"paced", 40, []string{"--send-interval", "5ms"}},
		{"unpaced", 200, []string{"--send-interval", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, url := pgtest.NewPool(t)
			rcv := newCounter(t, 2*time.Millisecond)
			env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+rcv.server.URL)
			for round := range rounds {
				queueMessages(t, pool, tc.perRound)
				cmd, _, stderr := cmdtest.Command(binary(t), env, append([]string{"--output", "json"}, tc.args...)...)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				// SIGTERM at a different point of each round's drain.
				waitForRequests(t, rcv, round*tc.perRound+3+round*(tc.perRound/20))
				_ = cmd.Process.Signal(syscall.SIGTERM)
				err := cmd.Wait()
				var exit *exec.ExitError
				if err != nil && !errors.As(err, &exit) {
					t.Fatal(err)
				}
				if got := statusCounts(t, pool); got["processing"] != 0 {
					t.Fatalf("round %d: %d messages left claimed after SIGTERM (exit %v): %s", round, got["processing"], err, lastLines(stderr.String(), 3))
				}
				// Drain what is left, so the next round starts clean.
				if res := cmdtest.Run(t, binary(t), env, tc.args...); res.Code != 0 {
					t.Fatalf("round %d's drain: exit %d: %s", round, res.Code, lastLines(res.Stderr, 3))
				}
			}
			if keys, repeats := rcv.delivered(); keys != rounds*tc.perRound || repeats != 0 {
				t.Errorf("%d keys delivered, %d repeats; want %d once each", keys, repeats, rounds*tc.perRound)
			}
		})
	}
}

// waitForRequests waits until the receiver has seen n requests.
func waitForRequests(t *testing.T, c *counter, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		c.mu.Lock()
		seen := c.seen
		c.mu.Unlock()
		if seen >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver saw %d requests in a minute, want %d", seen, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// closedPort is a loopback address nothing listens on: connections to it
// are refused.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func lastLines(s string, n int) string {
	lines := cmdtest.Lines(s)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Issue 22: a PostgreSQL restart mid-run exited 1 and left 3,200 claims
// waiting for --claim-timeout (2 minutes). The run now records what it
// sent once the server is back, hands back every other claim, and exits;
// nothing waits for the claim timeout, and the next run delivers the rest,
// each message once.
func TestPostgresRestartedMidRunHandsEveryClaimBack(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	pool, err := pgxpool.New(context.Background(), cluster.URL) // not the binaries' pool: the test's fixture and checks
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	const messages = 3000
	queueMessages(t, pool, messages)
	rcv := newCounter(t, 2*time.Millisecond)
	env := cmdtest.Env("DATABASE_URL="+cluster.URL, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+rcv.server.URL)

	cmd, _, stderr := cmdtest.Command(binary(t), env, "--send-interval", "0", "--workers", "4")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForRequests(t, rcv, 200)
	cluster.Restart(t)
	_ = cmd.Wait() // exit 1 (the database went away) or 0: what it left is the test
	pool.Reset()

	if got := statusCounts(t, pool); got["processing"] != 0 {
		t.Fatalf("after the restart: %v; want nothing left claimed: %s", got, lastLines(stderr.String(), 4))
	}
	res := cmdtest.Run(t, binary(t), env, "--send-interval", "0")
	if res.Code != 0 {
		t.Fatalf("the next run: exit %d: %s", res.Code, lastLines(res.Stderr, 3))
	}
	keys, repeats := rcv.delivered()
	if got := statusCounts(t, pool); got["sent"] != messages || keys != messages || repeats != 0 {
		t.Errorf("after the next run: %v, %d keys delivered, %d repeats; want %d sent once each", got, keys, repeats, messages)
	}
}
