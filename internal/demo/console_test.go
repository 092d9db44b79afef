package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// process is a program a test started in a process group of its own, its
// output (stdout and stderr together) read as it comes.
type process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	url  chan string // the console's address, once it says it
	done chan struct{}
}

var openLine = regexp.MustCompile(`engagement-console: open (http://[^ ]+/)`)

// start runs name with args in dir, in a process group of its own (as a
// terminal runs a command: Ctrl-C signals the whole group), and kills
// what is left of the group at cleanup.
func start(t *testing.T, dir string, env []string, name string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(name, args...), url: make(chan string, 1), done: make(chan struct{})}
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := openLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case p.url <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		p.cmd.Wait() //nolint:errcheck // the exit is read from ProcessState
		w.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // usually long gone
		<-p.done
	})
	return p
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// consoleURL waits until the console says where it listens.
func (p *process) consoleURL(t *testing.T) string {
	t.Helper()
	select {
	case u := <-p.url:
		return u
	case <-p.done:
		t.Fatalf("%s exited before the console served:\n%s", p.cmd.Path, p.output())
	case <-time.After(5 * time.Minute): // a bound on the build and the demo, not a wait for time to pass
		t.Fatalf("the console did not start within 5 minutes:\n%s", p.output())
	}
	return ""
}

// stop sends sig to the process (to its whole group with group: Ctrl-C in
// a terminal) and waits for it to exit.
func (p *process) stop(t *testing.T, sig syscall.Signal, group bool) *os.ProcessState {
	t.Helper()
	pid := p.cmd.Process.Pid
	if group {
		pid = -pid
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not exit within a minute of %s:\n%s", p.cmd.Path, sig, p.output())
	}
	return p.cmd.ProcessState
}

// TestMakeConsole (issue 41): after `make demo`, `make console` showed the
// demo's simulated later day as if it were now (goodbyes sent two days
// ahead, fresh ones counted as timed out), and stopping it with Ctrl-C
// ended in make's "Error 1" (go run exits 1 when interrupted). It runs
// `make console` as a user does, reads the pages, and presses Ctrl-C;
// then runs the demo's console again and stops it with SIGTERM.
func TestMakeConsole(t *testing.T) {
	ctx := context.Background()
	server, err := pgtest.ServerURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	const database = "engagement_demo_console_test"
	t.Cleanup(func() {
		if err := pgtest.DropDatabase(context.Background(), database); err != nil {
			t.Errorf("drop the demo's database: %v", err)
		}
	})
	bin := t.TempDir()
	env := append(os.Environ(), "TEST_DATABASE_URL="+server, "PGTEST_PROBE_URL=none")
	mk := start(t, root, env, "make", "--no-print-directory", "console", "BIN="+bin,
		"CONSOLE_ADDR="+freeAddr(t), "DEMO_FLAGS=-database "+database+" -users 200")
	base := mk.consoleURL(t)

	dbURL, err := pgtest.WithDatabase(server, database)
	if err != nil {
		t.Fatal(err)
	}
	checkDemoClock(t, base, dbURL)

	state := mk.stop(t, syscall.SIGINT, true)
	out := mk.output()
	if strings.Contains(out, "Error") || !(state.Success() || state.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT) {
		t.Errorf("make console after Ctrl-C: %s, want a clean stop (exit 0, or make's own SIGINT) without an error; output ends:\n%s", state, tail(out))
	}
	if !strings.Contains(out, "console stopped") {
		t.Errorf("the console did not say it stopped; output ends:\n%s", tail(out))
	}
	assertClosed(t, base)

	// SIGTERM to the demo alone (a supervisor, `kill`): it stops the
	// console it started and exits 0.
	demo := start(t, root, env, filepath.Join(bin, "demo"), "-bin", bin, "-console", freeAddr(t), "-database", database)
	base = demo.consoleURL(t)
	if state := demo.stop(t, syscall.SIGTERM, false); !state.Success() {
		t.Errorf("the demo after SIGTERM: %s, want exit 0; output ends:\n%s", state, tail(demo.output()))
	}
	assertClosed(t, base)
}

// checkDemoClock reads the console's pages and the demo's database: the
// pages' now is the demo's last simulated instant (its last run's as-of,
// or its last send), no goodbye was sent after
// it, and every goodbye the funnel counts as timed out had its 48 hours
// over by then.
func checkDemoClock(t *testing.T, base, dbURL string) {
	t.Helper()
	var overview struct {
		AsOf   time.Time `json:"as_of"`
		Funnel []struct {
			TimedOut int64 `json:"timed_out"`
		} `json:"funnel"`
	}
	req, _ := http.NewRequest(http.MethodGet, base, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&overview); err != nil {
		t.Fatal(err)
	}
	var timedOut int64
	for _, c := range overview.Funnel {
		timedOut += c.TimedOut
	}

	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	sim := fixture.DemoTimeoutsAsOf(t, conn, overview.AsOf)
	// The last instant the demo simulated, up to the next second (--as-of
	// is read to the second).
	if want := sim.LastDay.Add(time.Second - 1).Truncate(time.Second); !overview.AsOf.Equal(want) {
		t.Errorf("the console's pages are as of %s, want the demo's last simulated instant, %s", overview.AsOf, want)
	}
	if sim.SentLater != 0 {
		t.Errorf("%d users' goodbyes were sent after the console's now, %s", sim.SentLater, overview.AsOf)
	}
	if timedOut == 0 || sim.Timeouts == 0 {
		t.Fatalf("the demo shows no timed-out goodbye (funnel %d, users %d): nothing to check", timedOut, sim.Timeouts)
	}
	if sim.EarlyTimeouts != 0 {
		t.Errorf("%d of the %d timed-out goodbyes had not had their 48 h by the console's now, %s", sim.EarlyTimeouts, sim.Timeouts, overview.AsOf)
	}
}

// freeAddr is a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// assertClosed fails t when something still answers at base: the console
// outlived its demo.
func assertClosed(t *testing.T, base string) {
	t.Helper()
	host := strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/")
	if conn, err := net.DialTimeout("tcp", host, 2*time.Second); err == nil {
		conn.Close()
		t.Errorf("the console still answers on %s after the demo exited", host)
	}
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-12):], "\n")
}
