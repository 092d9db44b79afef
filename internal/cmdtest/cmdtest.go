// Package cmdtest builds the project's binaries and runs them as real
// processes, for tests of exit codes, output, signals and concurrency.
package cmdtest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	buildOnce sync.Map // package path -> *buildResult
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// Build compiles the main package pkg (like "./cmd/engagement-daily",
// relative to the module root) once per test process and returns the path of
// the binary.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	v, _ := buildOnce.LoadOrStore(pkg, &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			b.err = err
			return
		}
		dir, err := os.MkdirTemp("", "engagement-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = errors.New("go build " + pkg + ": " + err.Error() + "\n" + string(out))
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Result is what a finished process left.
type Result struct {
	Code   int
	Stdout string
	Stderr string
}

// Env returns a minimal environment with vars added (NAME=value), so the
// caller's DATABASE_URL and friends never leak into a test.
func Env(vars ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LOG_FORMAT=json"}
	return append(env, vars...)
}

// Command prepares bin with args and env, its output captured into the
// returned buffers.
func Command(bin string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	return cmd, &stdout, &stderr
}

// Run runs bin to completion.
func Run(t testing.TB, bin string, env []string, args ...string) Result {
	t.Helper()
	cmd, stdout, stderr := Command(bin, env, args...)
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", filepath.Base(bin), err)
	}
	return Result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
}

// Lines splits output into its non-empty lines.
func Lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the module")
	}
	return filepath.Dir(mod), nil
}
