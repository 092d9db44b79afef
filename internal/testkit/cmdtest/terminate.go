package cmdtest

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FirstInstant is the line of the Go runtime's init trace (GODEBUG
// inittrace=1) that Terminate counts its delay from: package os is
// initialized. The binaries' first package (earlystop/first, which imports
// nothing) is always initialized before it, and every package of the
// module, pgx and the binary's own code after.
const FirstInstant = "init os @"

// Terminate runs bin with args and env and sends it SIGTERM delay after
// the program's first instant (FirstInstant), not after the process was
// started: the kernel loading a 40 MB binary and the runtime's start take
// from under a millisecond to tens on a loaded machine, and run none of
// the program's code, so a delay counted from the start would land before
// or after them by chance. A delay of 0 is a stop before any package of
// the module, the database's driver included, has started. The returned
// stderr holds the binary's own lines, without the init trace. It fails t
// when the binary logged a PostgreSQL WARNING (see NoServerWarnings).
func Terminate(t testing.TB, bin string, env []string, delay time.Duration, args ...string) Result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(slices.Clone(env), "GODEBUG=inittrace=1")
	var stdout bytes.Buffer
	stderr := &traceWatch{seen: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", filepath.Base(bin), err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-stderr.seen:
		if delay > 0 {
			time.Sleep(delay) // when the stop comes, not a wait for something to happen
		}
		_ = cmd.Process.Signal(syscall.SIGTERM) // it may have ended already
	case <-done:
		t.Errorf("%s ended before its packages were initialized", filepath.Base(bin))
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Errorf("%s never initialized package os", filepath.Base(bin))
	}
	<-done
	res := Result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.ownLines()}
	NoServerWarnings(t, filepath.Base(bin), res.Stderr)
	return res
}

// traceWatch is a binary's stderr: it closes seen once the init trace
// reports FirstInstant.
type traceWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan struct{}
	shut bool
}

func (w *traceWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.shut && bytes.Contains(w.buf.Bytes(), []byte(FirstInstant)) {
		w.shut = true
		close(w.seen)
	}
	return len(p), nil
}

// ownLines is what the binary wrote, the init trace's lines left out.
func (w *traceWatch) ownLines() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out strings.Builder
	for line := range strings.Lines(w.buf.String()) {
		if !strings.HasPrefix(line, "init ") {
			out.WriteString(line)
		}
	}
	return out.String()
}
