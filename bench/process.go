package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is one run of a binary as a process.
type proc struct {
	Seconds float64 `json:"seconds"`     // wall time, start to exit
	MaxRSS  int64   `json:"max_rss_kib"` // peak resident set size (getrusage ru_maxrss, KiB on Linux)
	CPU     float64 `json:"cpu_seconds"` // user + system time of the process itself (not the server's)
}

// runBinary runs bin/name with args and DATABASE_URL=dbURL, and decodes
// its stdout (--output json) into summary when not nil.
func runBinary(ctx context.Context, bin, name, dbURL string, summary any, args ...string) (proc, error) {
	return runBinaryStderr(ctx, bin, name, dbURL, summary, false, args...)
}

// runBinaryStderr is runBinary, with the process's stderr sent to
// /dev/null when discard is set (an error then quotes none of it).
func runBinaryStderr(ctx context.Context, bin, name, dbURL string, summary any, discard bool, args ...string) (proc, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if discard {
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return proc{}, err
		}
		defer null.Close()
		cmd.Stderr = null // an *os.File: the child writes to it directly, no pipe
	}
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		return proc{}, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, lastLines(stderr.String(), 5))
	}
	p := proc{Seconds: took.Seconds()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		p.MaxRSS = ru.Maxrss
		p.CPU = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)).Seconds()
	}
	if summary != nil {
		if err := json.Unmarshal(stdout.Bytes(), summary); err != nil {
			return p, fmt.Errorf("%s printed %q: %w", name, lastLines(stdout.String(), 3), err)
		}
	}
	return p, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func createFile(path string) (*os.File, error) { return os.Create(path) }

// background is a binary started with startBinary and not yet waited for.
type background struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{} // closed when the process has exited
	err            error         // its exit, valid after done
	killed         atomic.Bool   // kill sent it SIGKILL
}

// startBinary starts bin/name with args and DATABASE_URL=dbURL in the
// background; wait or kill end it. ctx's end kills it too.
func startBinary(ctx context.Context, bin, name, dbURL string, args ...string) (*background, error) {
	b := &background{name: name, done: make(chan struct{})}
	b.cmd = exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	b.cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	b.cmd.Stdout, b.cmd.Stderr = &b.stdout, &b.stderr
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		b.err = b.cmd.Wait()
		close(b.done)
	}()
	return b, nil
}

// wait waits for the process and decodes its stdout (--output json) into
// summary when not nil. A non-zero exit is an error quoting its stderr.
func (b *background) wait(summary any) error {
	<-b.done
	if b.err != nil {
		return fmt.Errorf("%s %s: %w\n%s", b.name, strings.Join(b.cmd.Args[1:], " "), b.err, lastLines(b.stderr.String(), 5))
	}
	if summary != nil {
		if err := json.Unmarshal(b.stdout.Bytes(), summary); err != nil {
			return fmt.Errorf("%s printed %q: %w", b.name, lastLines(b.stdout.String(), 3), err)
		}
	}
	return nil
}

// kill sends the process SIGKILL (kill -9) unless it has exited.
func (b *background) kill() {
	select {
	case <-b.done:
	default:
		b.killed.Store(true)
		_ = b.cmd.Process.Signal(syscall.SIGKILL)
	}
}

// runSummary is what queue-process --output json prints, read by name so
// the benchmark does not depend on the sender package's types.
type runSummary struct {
	Processed int   `json:"processed"`
	Sent      int   `json:"sent"`
	Retried   int   `json:"retried"`
	Failed    int   `json:"failed"`
	Recovered int   `json:"recovered"`
	Duration  int64 `json:"duration_ms"`
	// Cancelled and CancelReasons say why a queue was not all sent.
	Cancelled     int            `json:"cancelled"`
	CancelReasons map[string]int `json:"cancel_reasons"`
}

// flagDefault is the default a binary's --help states for flag, or "" when
// it states none: the benchmark labels runs with the defaults of the
// binary it measures, not of the source it was compiled with.
func flagDefault(ctx context.Context, bin, name, flag string) string {
	out, _ := exec.CommandContext(ctx, filepath.Join(bin, name), "--help").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || (f[0] != "--"+flag && !(len(f) > 1 && f[1] == "--"+flag)) {
			continue
		}
		if i := strings.LastIndex(line, "(default "); i >= 0 {
			return strings.Trim(strings.TrimSuffix(strings.TrimSpace(line[i+len("(default "):]), ")"), `"`)
		}
		return ""
	}
	return ""
}
