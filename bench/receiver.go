package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/arrivals"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// The paced suite's receiver runs as a process of its own (this tool,
// re-executed with -serve-paced-receiver), at nice -10 when allowed: the
// arrival times it notes are the measurement, and on a busy 2-core machine
// a receiver sharing the tool's process and priority would note many of
// them late, and bunched, when it is itself kept from running.

// receiverReport is what the receiver process answers on /report.
type receiverReport struct {
	Arrivals       []int64 `json:"arrivals_unix_ns"`
	Keys           int     `json:"distinct_keys"`
	StallMaxNS     int64   `json:"stall_max_ns"`
	StallsOver10ms int     `json:"stalls_over_10ms"`
	// Stalls are the stalls over 10 ms: [start unix ns, length ns].
	Stalls [][2]int64 `json:"stalls"`
	Nice   int        `json:"nice"`
}

// sorted returns the arrivals in order.
func (r receiverReport) sorted() []time.Time {
	at := make([]time.Time, len(r.Arrivals))
	for i, ns := range r.Arrivals {
		at[i] = time.Unix(0, ns)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	return at
}

// pace measures sorted arrivals: how many, the steady span (first to
// last), the most in any 1-second window [t, t+1s), and the least gap
// between two consecutive ones.
func pace(at []time.Time) (requests int, steady time.Duration, maxWindow int, minGap time.Duration) {
	requests = len(at)
	if requests == 0 {
		return
	}
	steady = at[requests-1].Sub(at[0])
	minGap = -1
	j := 0
	for i := range at {
		for j < requests && at[j].Before(at[i].Add(time.Second)) {
			j++
		}
		maxWindow = max(maxWindow, j-i)
		if i > 0 {
			if g := at[i].Sub(at[i-1]); minGap < 0 || g < minGap {
				minGap = g
			}
		}
	}
	return
}

// receiverProcess is a running receiver process.
type receiverProcess struct {
	url   string // the hook
	base  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startReceiverProcess starts this tool as a receiver answering after
// delay, under `nice -n -10` when the nice command exists (without the
// privilege, nice warns and runs it at the usual priority).
func startReceiverProcess(ctx context.Context, delay time.Duration) (*receiverProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{self, "-serve-paced-receiver=" + delay.String()}
	if nice, err := exec.LookPath("nice"); err == nil {
		args = append([]string{nice, "-n", "-10"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stderr = io.Discard
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the receiver: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the receiver printed %q: %v", line, err)
	}
	base := strings.TrimSpace(line)
	return &receiverProcess{url: base + "/hook", base: base, cmd: cmd, stdin: stdin}, nil
}

// report fetches what the receiver noted so far.
func (r *receiverProcess) report() (receiverReport, error) {
	var rep receiverReport
	resp, err := http.Get(r.base + "/report")
	if err != nil {
		return rep, fmt.Errorf("receiver report: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return rep, fmt.Errorf("receiver report: %w", err)
	}
	return rep, nil
}

// close ends the receiver process (it exits when its stdin closes).
func (r *receiverProcess) close() {
	r.stdin.Close()
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
}

// serveReceiver is the -serve-paced-receiver mode: it prints its base URL,
// serves /hook (note the arrival and Idempotency-Key, check the signature,
// answer 200 after delay) and /report, and exits when stdin closes.
func serveReceiver(delay time.Duration) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var (
		mu      sync.Mutex
		arrived []int64
		keys    = map[string]int{}
	)
	stalls := &stallWatcher{}
	go stalls.run()
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(rw http.ResponseWriter, req *http.Request) {
		// When the request's bytes arrived, by the kernel's clock: the
		// handler runs late on a busy machine (the stalls below).
		at := arrivals.At(req)
		if at.IsZero() {
			at = time.Now()
		}
		body, err := io.ReadAll(req.Body)
		if err != nil || !transport.VerifySignature(webhookSecret, body, req.Header.Get("X-Engagement-Signature")) {
			rw.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		arrived = append(arrived, at.UnixNano())
		keys[req.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		select {
		case <-time.After(delay):
			rw.WriteHeader(http.StatusOK)
		case <-req.Context().Done():
		}
	})
	mux.HandleFunc("/report", func(rw http.ResponseWriter, _ *http.Request) {
		prio, _ := syscall.Getpriority(syscall.PRIO_PROCESS, 0) // the kernel's 20 - nice
		mu.Lock()
		rep := receiverReport{Arrivals: slices.Clone(arrived), Keys: len(keys), Nice: 20 - prio}
		mu.Unlock()
		longest, over, list := stalls.read()
		rep.StallMaxNS, rep.StallsOver10ms, rep.Stalls = int64(longest), over, list
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(rep)
	})
	srv := &http.Server{Handler: mux, ConnContext: arrivals.ConnContext}
	fmt.Printf("http://%s\n", ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		srv.Close()
	}()
	if err := srv.Serve(arrivals.Listener(ln)); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// stallWatcher sleeps 1 ms at a time, noting the longest oversleep (how
// long its process was kept from running) and how many exceeded 10 ms.
type stallWatcher struct {
	mu      sync.Mutex
	longest time.Duration
	over10  int
	stalls  [][2]int64 // the ones over 10 ms: start (unix ns), length
}

func (w *stallWatcher) run() {
	for {
		t := time.Now()
		time.Sleep(time.Millisecond)
		late := time.Since(t) - time.Millisecond
		w.mu.Lock()
		w.longest = max(w.longest, late)
		if late > 10*time.Millisecond {
			w.over10++
			w.stalls = append(w.stalls, [2]int64{t.UnixNano(), int64(late)})
		}
		w.mu.Unlock()
	}
}

func (w *stallWatcher) read() (time.Duration, int, [][2]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest, w.over10, slices.Clone(w.stalls)
}
