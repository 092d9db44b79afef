package main_test

import (
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Three processes on the Cloud API (which cannot de-duplicate), a provider
// that fails at random (500s, resets after reading the request, slow
// answers), short claims, and SIGKILL at random moments: when the queue is
// drained, no recipient got a message twice and no message marked sent is
// missing at the provider (issue 14: "no message is ever sent twice by the
// project, whatever the timing").
func TestChaosWithRandomKillsSendsNothingTwice(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	rng := rand.New(rand.NewPCG(14, 14))    //nolint:gosec // seeded: the provider's faults repeat from run to run
	killer := rand.New(rand.NewPCG(41, 41)) //nolint:gosec // seeded, as above; the kill loop's own
	var mu sync.Mutex
	api := &cloudAPI{received: map[string]int{}, arrived: make(chan string, 10000)}
	api.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // the run's read of the number's health, not a send
			w.WriteHeader(http.StatusNotFound)
			return
		}
		var body struct {
			To string `json:"to"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		roll := rng.IntN(100)
		mu.Unlock()
		if roll < 15 { // a 500: nothing was sent
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		api.mu.Lock()
		api.received[body.To]++
		api.mu.Unlock()
		switch {
		case roll < 25: // sent, then the connection resets before the answer
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
			return
		case roll < 45: // sent, slowly answered
			time.Sleep(300 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"messages":[{"id":"wamid.` + body.To + `"}]}`))
	}))
	t.Cleanup(func() { api.server.CloseClientConnections(); api.server.Close() })
	numbers := queueRecipients(t, pool, 150)
	env := cloudEnv(t, url, api)
	args := []string{"--send-interval", "0", "--workers", "4", "--claim-timeout", "1s", "--retry-base", "10ms"}

	start := func() *exec.Cmd {
		cmd, _, _ := cmdtest.Command(bin, env, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	procs := []*exec.Cmd{start(), start(), start()}
	kills := 0
	for until := time.Now().Add(6 * time.Second); time.Now().Before(until); {
		time.Sleep(time.Duration(200+killer.IntN(500)) * time.Millisecond)
		i := killer.IntN(len(procs))
		_ = procs[i].Process.Signal(syscall.SIGKILL)
		_ = procs[i].Wait()
		kills++
		procs[i] = start()
	}
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGKILL)
		_ = p.Wait()
	}
	// Time passes (the database's clock): every claim of the dead expires.
	fixture.ExpireClaims(t, pool)
	// The provider behaves again, and a last run drains the queue.
	mu.Lock()
	rng = rand.New(rand.NewPCG(99, 99)) //nolint:gosec // seeded, as above
	mu.Unlock()
	for range 10 {
		if n := fixture.SendFiguresOf(t, pool, time.Time{}).Unfinished; n == 0 {
			break
		}
		if res := cmdtest.Exec(t, queuecmd.NewCommand, env, append(args, "--max-duration", "20s")...); res.Code != 0 {
			t.Fatalf("draining run: exit %d: %s", res.Code, res.Stderr)
		}
	}

	checkExactlyOnce(t, pool, api)
	got := statusCounts(t, pool)
	if got["sent"]+got["failed"] != len(numbers) {
		t.Errorf("statuses %v after %d kills, want all %d messages settled", got, kills, len(numbers))
	}
	t.Logf("%d kills; statuses %v; the provider received %d distinct messages", kills, got, len(api.counts()))
}
