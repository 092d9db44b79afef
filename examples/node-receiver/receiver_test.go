// Package receiver_test runs the reference Node.js receiver (server.js,
// over the npm package's createReceiver) against the real engagementctl
// check-receiver and the real queue-process, killed with SIGKILL mid-run:
// no repeat reaches its send function. package_test.go runs the package's
// own tests.
package receiver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { cmdtest.Main(m) }

const secret = "reference-receiver-secret"

var (
	npmOnce sync.Once
	npmErr  error
)

// nodeReady installs Node.js and npm from Debian's packages when missing,
// and the package's dependencies, its tests' included (npm ci from
// package-lock.json, when one is missing: localsvc.NpmReady).
func nodeReady(t *testing.T) {
	t.Helper()
	npmOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for bin, pkg := range map[string]string{"node": "nodejs", "npm": "npm"} {
			if _, err := exec.LookPath(bin); err != nil {
				if npmErr = localsvc.AptInstall(ctx, "node-receiver test", pkg, "install Node.js and npm (apt-get install nodejs npm)"); npmErr != nil {
					return
				}
			}
		}
		_, npmErr = localsvc.NpmReady(ctx, ".")
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
}

// nodeReceiver is server.js, running on a free loopback port with a
// database of its own (the bot's).
type nodeReceiver struct {
	url               string
	sendLog, replayed string

	mu     sync.Mutex
	stderr []string // what it logged
}

// logged is what the receiver wrote to stderr so far.
func (r *nodeReceiver) logged() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.stderr, "\n")
}

// startReceiver starts server.js; env adds to its environment (SEND_ERROR).
func startReceiver(t *testing.T, env ...string) *nodeReceiver {
	t.Helper()
	nodeReady(t)
	r, err := launchReceiver(t, pgtest.NewEmptyDatabase(t), env...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// launchReceiver starts server.js on the bot's database at databaseURL and
// waits until it listens, on the loopback port the kernel gives it (PORT=0:
// a port picked by the test and bound later by the receiver could be taken
// in between, by any of the suite's thousands of outgoing connections). A
// receiver that exits first is an error with what it wrote; env adds to
// its environment, and its PORT wins.
func launchReceiver(t *testing.T, databaseURL string, env ...string) (*nodeReceiver, error) {
	dir := t.TempDir()
	r := &nodeReceiver{sendLog: filepath.Join(dir, "sent"), replayed: filepath.Join(dir, "replayed")}
	cmd := exec.Command("node", "server.js")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+databaseURL, "WEBHOOK_SECRET="+secret,
		"PORT=0", "SEND_LOG="+r.sendLog, "REPLAY_LOG="+r.replayed)
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := make(chan string, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			r.mu.Lock()
			r.stderr = append(r.stderr, sc.Text())
			r.mu.Unlock()
			if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				listening <- addr
			}
		}
	}()
	select {
	case addr := <-listening:
		r.url = "http://" + addr + "/engagement"
		return r, nil
	case <-ended:
		return nil, fmt.Errorf("the receiver ended before it listened: %s", r.logged())
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("the receiver did not start listening within a minute: %s", r.logged())
	}
}

// A receiver that cannot listen (its port taken, as a port picked for it
// once was, by another connection of a busy suite: "did not start
// listening within a minute", 2026-11-30) says why at once.
func TestAReceiverThatCannotListenSaysWhy(t *testing.T) {
	t.Parallel()
	nodeReady(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	_, err = launchReceiver(t, "postgres://127.0.0.1:9/none", fmt.Sprintf("PORT=%d", port))
	if err == nil || !strings.Contains(err.Error(), "EADDRINUSE") {
		t.Fatalf("a receiver on a taken port: %v; want an error with EADDRINUSE", err)
	}
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return cmdtest.Lines(string(data))
}

type report struct {
	SignatureChecked bool   `json:"signature_checked"`
	Answered         bool   `json:"answered"`
	RepeatDropped    bool   `json:"repeat_dropped"`
	OK               bool   `json:"ok"`
	Error            string `json:"error"`
}

func checkReceiver(t *testing.T, url string, args ...string) (cmdtest.Result, report) {
	t.Helper()
	res := cmdtest.Exec(t, ctl.NewCommand, nil, append([]string{"check-receiver", "--webhook-url", url, "--output", "json"}, args...)...)
	var rep report
	if res.Stdout != "" {
		if err := json.Unmarshal([]byte(cmdtest.Lines(res.Stdout)[0]), &rep); err != nil {
			t.Fatalf("report %q: %v", res.Stdout, err)
		}
	}
	return res, rep
}

// The reference receiver passes engagementctl check-receiver, and the
// probe reaches nobody: nothing is sent.
func TestTheReferenceReceiverPassesTheCheck(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	res, rep := checkReceiver(t, r.url, "--webhook-secret", secret)
	if res.Code != 0 || !rep.OK || !rep.SignatureChecked || !rep.Answered || !rep.RepeatDropped {
		t.Fatalf("check-receiver: exit %d, %+v, stderr %q; want 0 and every check true", res.Code, rep, res.Stderr)
	}
	if sent := lines(t, r.sendLog); len(sent) != 0 {
		t.Errorf("the probe reached send(): %v", sent)
	}
	if strings.Contains(res.Stdout+res.Stderr, secret) {
		t.Error("the secret reached the output")
	}
}

// Receivers that do not keep their side of the contract fail the check
// (exit 4) on the point they miss; one that does not answer is exit 1, and
// missing flags exit 2.
func TestCheckReceiverNamesWhatAReceiverMisses(t *testing.T) {
	t.Parallel()
	server := func(h http.HandlerFunc) string {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s.URL
	}
	ignoresSignatures := server(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusOK)
	})
	var mu sync.Mutex
	seen := map[string]bool{}
	checksButResends := server(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("X-Engagement-Signature"), "sha256=") || r.Header.Get("X-Engagement-Probe") != "1" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		first := !seen[r.Header.Get("X-Engagement-Signature")]
		seen[r.Header.Get("X-Engagement-Signature")] = true
		mu.Unlock()
		if first && len(seen) == 1 {
			w.WriteHeader(http.StatusUnauthorized) // the wrong signature comes first
			return
		}
		w.WriteHeader(http.StatusOK) // answers the repeat as a new message
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()

	for _, tc := range []struct {
		name  string
		url   string
		args  []string
		code  int
		check func(report) bool
	}{
		{"ignores signatures", ignoresSignatures, []string{"--webhook-secret", secret}, 4, func(r report) bool { return !r.SignatureChecked && r.Answered && !r.OK }},
		{"answers repeats as new", checksButResends, []string{"--webhook-secret", secret}, 4, func(r report) bool { return r.SignatureChecked && r.Answered && !r.RepeatDropped }},
		{"unreachable", closed, []string{"--webhook-secret", secret}, 1, func(r report) bool { return r.Error != "" && !r.OK }},
		{"no secret", ignoresSignatures, nil, 2, func(report) bool { return true }},
	} {
		res, rep := checkReceiver(t, tc.url, tc.args...)
		if res.Code != tc.code || !tc.check(rep) {
			t.Errorf("%s: exit %d, %+v, stderr %q; want exit %d", tc.name, res.Code, rep, res.Stderr, tc.code)
		}
	}
}

// Issue 22: after a kill -9, 1,068 of 2,841 messages reached the webhook a
// second time under the same key, which is safe only if the bot drops the
// repeats. queue-process, killed with SIGKILL again and again, then run to
// the end, against the reference receiver: every message is sent once,
// the receiver saw the repeats, and none reached its send function.
func TestNoRepeatReachesTheReferenceReceiversSend(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	pool, url := pgtest.NewPool(t)
	const messages = 3000
	queue(t, pool, messages)
	bin := cmdtest.Build(t, "./cmd/queue-process")
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+r.url,
		"ENGAGEMENT_WEBHOOK_SECRET="+secret)
	args := []string{"--send-interval", "0", "--claim-timeout", "1s"}

	for kill := 1; kill <= 4; kill++ {
		cmd, stdout, stderr := cmdtest.Command(bin, env, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		// Killed once this run's sends are under way. A run may also end
		// by itself (an overloaded receiver that resets connections looks
		// like an outage, and the run stops and releases): then the next
		// one starts, as cron would start it.
		want := len(lines(t, r.sendLog)) + 150
		deadline := time.Now().Add(time.Minute)
	wait:
		for len(lines(t, r.sendLog)) < want && len(lines(t, r.sendLog)) < messages {
			select {
			case <-exited:
				t.Logf("kill %d: the run ended by itself before it was killed: %s", kill, strings.TrimSpace(stdout.String()))
				break wait
			case <-time.After(5 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-exited
				t.Fatalf("kill %d: the receiver got no sends for a minute (%d so far); the run's stdout %q, last stderr lines:\n%s",
					kill, len(lines(t, r.sendLog)), stdout.String(), lastLines(stderr.String(), 15))
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		fixture.ExpireClaims(t, pool) // the dead run's lease runs out
	}
	// Then runs to the end, as cron would start them (a run stopped by an
	// apparent outage leaves the rest pending for the next).
	for run := 1; fixture.CountMessages(t, pool, fixture.Messages{Status: "pending"})+
		fixture.CountMessages(t, pool, fixture.Messages{Status: "processing"}) > 0; run++ {
		if run > 10 {
			t.Fatal("10 runs after the kills did not drain the queue")
		}
		if res := cmdtest.Run(t, bin, env, args...); res.Code != 0 {
			t.Fatalf("run %d after the kills: exit %d: %s", run, res.Code, res.Stderr)
		}
	}

	if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "sent"}); n != messages {
		t.Errorf("%d messages sent, want %d", n, messages)
	}
	sent := lines(t, r.sendLog)
	distinct := map[string]int{}
	for _, k := range sent {
		distinct[k]++
	}
	repeats := len(sent) - len(distinct)
	if len(distinct) != messages || repeats != 0 {
		t.Errorf("send() ran %d times for %d keys (%d repeats); want each of the %d once", len(sent), len(distinct), repeats, messages)
	}
	replayed := lines(t, r.replayed)
	t.Logf("%d requests repeated a delivered key and were dropped; %d reached send()", len(replayed), repeats)
	if len(replayed) == 0 {
		t.Error("no repeat reached the receiver: the kills did not exercise its de-duplication")
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// queue queues n due weekly reviews for one user.
func queue(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	fixture.DueReviews(t, pool, n, "k")
}
