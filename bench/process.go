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
	cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
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
