// Package cmdtest runs the project's commands for tests: in this process
// (Exec, or Start in the background: flags, environment, exit codes, the
// summary on stdout and the logs on stderr, exactly as the binary would),
// or built and run as real processes (Build, Run, Command) for what needs
// one: signals, kill -9, runs in separate processes, a process's own
// environment (TZ, HTTP_PROXY).
//
// A test package that calls Build must run its tests through Main, from its
// TestMain:
//
//	func TestMain(m *testing.M) { cmdtest.Main(m) }
//
// The binaries go into one folder per test process ($TMPDIR/engagement-bin-
// pid<PID>-<random>), which Main removes when the tests end. A folder left
// behind by a process that did not get there (killed, timed out) is removed
// by the next Build of any test process once its process is gone.
package cmdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// binPrefix starts the name of every folder Build creates under os.TempDir.
const binPrefix = "engagement-bin-"

var (
	buildOnce sync.Map // package path -> *buildResult
	mainRuns  atomic.Bool

	binDirOnce sync.Once
	binDir     string
	binDirErr  error
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// Main runs the tests of m, then each of after (in order: what the tests
// shared, such as browsertest.Share's browser, stopped), removes the
// binaries Build made for them, and exits with the tests' exit code. Call
// it from TestMain.
func Main(m *testing.M, after ...func()) {
	mainRuns.Store(true)
	code := m.Run()
	for _, f := range after {
		f()
	}
	if binDir != "" {
		if err := os.RemoveAll(binDir); err != nil {
			fmt.Fprintf(os.Stderr, "cmdtest: remove the test binaries: %v\n", err)
		}
	}
	os.Exit(code)
}

// ParallelAtLeast raises the number of parallel tests of the package
// (-test.parallel, GOMAXPROCS by default: 2 on a 2-core machine) to n,
// unless the command line set it (go test -parallel). Call it from
// TestMain, before Main, in a package whose parallel tests spend their
// time waiting (on the processes they start, on receivers, on a browser)
// rather than computing: two at a time leaves the CPU idle. go test
// -parallel 2 puts the default back.
func ParallelAtLeast(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	f := flag.Lookup("test.parallel")
	if set || f == nil {
		return
	}
	if cur, err := strconv.Atoi(f.Value.String()); err == nil && cur < n {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// Build compiles the main package pkg (like "./cmd/engagement-daily",
// relative to the module root) once per test process and returns the path of
// the binary. The package's TestMain must call Main (see the package
// comment).
//
// The binary is linked once for all test processes: go run caches the
// executables it links in the Go build cache, keyed like every other build
// action by everything that goes into it, so the packages of one go test
// ./... (and the next run, when nothing changed) share one link per binary,
// instead of each linking its own (some 3 s of CPU a binary, 28 times a
// run). The cached file is hard-linked (or copied) into this process's
// folder, which Main removes.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	if !mainRuns.Load() {
		t.Fatal("cmdtest.Build: this test package must run its tests through cmdtest.Main, which removes the binaries afterwards: add\n\tfunc TestMain(m *testing.M) { cmdtest.Main(m) }")
	}
	v, _ := buildOnce.LoadOrStore(pkg, &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			b.err = err
			return
		}
		dir, err := processBinDir()
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(pkg))
		b.err = build(root, pkg, b.path)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// BinariesEnv names the folder where make test's runner
// (internal/testkit/testrun) put the module's main packages, built once for
// the run and named after their last path element: Build takes its binary
// from there, without asking the go command (some 0.3 s of CPU a call,
// about 45 calls a run).
const BinariesEnv = "CMDTEST_BINARIES"

// build puts the binary of the main package pkg at dst: the runner's
// (BinariesEnv), or go run's cached executable (cachedExecutable), linked
// or copied, or, where go run caches none, go build's.
func build(root, pkg, dst string) error {
	if dir := os.Getenv(BinariesEnv); dir != "" {
		exe := filepath.Join(dir, filepath.Base(pkg))
		if info, err := os.Stat(exe); err == nil && info.Mode().IsRegular() { //nolint:gosec // the runner's folder, named by make test's runner
			if os.Link(exe, dst) == nil || copyFile(exe, dst) == nil {
				return nil
			}
		}
	}
	if exe, err := cachedExecutable(root, pkg); err != nil {
		return err
	} else if exe != "" {
		if os.Link(exe, dst) == nil || copyFile(exe, dst) == nil {
			return nil
		}
	}
	cmd := exec.Command("go", "build", "-o", dst, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return errors.New("go build " + pkg + ": " + err.Error() + "\n" + string(out))
	}
	return nil
}

// cachedExecutable returns the path of pkg's executable in the Go build
// cache: go run -exec echo prints the path it would run. A run that had to
// link prints a temporary path, gone when go run exits, and leaves the
// executable cached, so the next prints the cache's. "" when there is none
// (a go command that does not cache go run's executables).
func cachedExecutable(root, pkg string) (string, error) {
	echo, err := exec.LookPath("echo")
	if err != nil {
		return "", nil
	}
	for range 2 {
		cmd := exec.Command("go", "run", "-exec", echo, pkg)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", errors.New("go run " + pkg + ": " + err.Error() + "\n" + stderr.String())
		}
		exe := strings.TrimSpace(string(out))
		if info, err := os.Stat(exe); err == nil && info.Mode().IsRegular() {
			return exe, nil
		}
	}
	return "", nil
}

// copyFile copies the executable src to dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src) //nolint:gosec // the build cache's executable
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755) //nolint:gosec // an executable
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// processBinDir creates this process's folder for binaries, first removing
// the folders of test processes that are gone.
func processBinDir() (string, error) {
	binDirOnce.Do(func() {
		sweep(os.TempDir(), time.Now())
		binDir, binDirErr = os.MkdirTemp("", binPrefix+"pid"+strconv.Itoa(os.Getpid())+"-")
	})
	return binDir, binDirErr
}

// A folder of binaries whose PID runs is removed only after reusedAfter
// (no test process lives that long, even under -timeout 90m: the PID was
// reused); one of the old naming, with no PID, after oldNamingAfter.
const (
	reusedAfter    = 24 * time.Hour
	oldNamingAfter = time.Hour
)

// sweep removes the folders of binaries under tmp whose test process is
// gone (see reusedAfter and oldNamingAfter).
func sweep(tmp string, now time.Time) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), binPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		age := now.Sub(info.ModTime())
		if rest, ok := strings.CutPrefix(name, "pid"); ok {
			pidText, _, _ := strings.Cut(rest, "-")
			pid, err := strconv.Atoi(pidText)
			if err == nil && pid > 0 && age < reusedAfter &&
				(pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH) {
				continue // its process runs
			}
		} else if age < oldNamingAfter {
			continue
		}
		_ = os.RemoveAll(filepath.Join(tmp, e.Name())) // best effort: another process may sweep it too
	}
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

// Run runs bin to completion. Like Exec, it fails t when the binary logged
// a PostgreSQL WARNING (see NoServerWarnings).
func Run(t testing.TB, bin string, env []string, args ...string) Result {
	t.Helper()
	cmd, stdout, stderr := Command(bin, env, args...)
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", filepath.Base(bin), err)
	}
	res := Result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
	NoServerWarnings(t, filepath.Base(bin), res.Stderr)
	return res
}

// Exec runs the command newCmd builds in this process, as Run runs its
// binary: with args, only the environment variables env (NAME=value, as Env
// builds them), and its stdout, stderr and exit code (cli.Main's) captured.
// It fails t when the command logged a PostgreSQL WARNING.
func Exec(t testing.TB, newCmd func() *cobra.Command, env []string, args ...string) Result {
	t.Helper()
	res := ExecWith(context.Background(), newCmd, cli.Env{LookupEnv: cli.MapEnv(env)}, args...)
	NoServerWarnings(t, newCmd().Name(), res.Stderr)
	return res
}

// NoServerWarnings fails t for every WARNING the PostgreSQL server sent a
// command (the binaries log each as a line with postgres.WarningMessage):
// a SET LOCAL outside a transaction block, for one, warns on every call
// and its setting never applies. None is expected anywhere in the tests.
func NoServerWarnings(t testing.TB, name, stderr string) {
	t.Helper()
	for _, line := range Lines(stderr) {
		var l struct {
			Message string `json:"message"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == postgres.WarningMessage ||
			strings.Contains(line, postgres.WarningMessage+" ") {
			t.Errorf("%s caused a PostgreSQL WARNING: %s", name, line)
		}
	}
}

// ExecWith is Exec with a context (cancelling it is the binary's SIGTERM)
// and a whole cli.Env; env's Stdout and Stderr are replaced by the buffers
// the Result returns.
func ExecWith(ctx context.Context, newCmd func() *cobra.Command, env cli.Env, args ...string) Result {
	var stdout, stderr bytes.Buffer
	env.Stdout, env.Stderr = &stdout, &stderr
	code := cli.Main(ctx, newCmd(), args, env)
	return Result{Code: code, Stdout: stdout.String(), Stderr: stderr.String()}
}

// Running is a command Start runs in this process.
type Running struct {
	cancel context.CancelFunc
	done   chan struct{}
	res    Result
}

// Start runs the command newCmd builds in this process, in the background,
// as Exec would; Wait returns its Result.
func Start(newCmd func() *cobra.Command, env []string, args ...string) *Running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.res = ExecWith(ctx, newCmd, cli.Env{LookupEnv: cli.MapEnv(env)}, args...)
	}()
	return r
}

// Done is closed when the command has returned.
func (r *Running) Done() <-chan struct{} { return r.done }

// Stop cancels the command's context (the binary's SIGTERM) and waits for
// it to return.
func (r *Running) Stop() Result {
	r.cancel()
	return r.Wait()
}

// Wait waits for the command to return and returns what it left.
func (r *Running) Wait() Result {
	<-r.done
	r.cancel()
	return r.res
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

// ModuleRoot is the directory of the module's go.mod, as the go command on
// PATH finds it from the test's directory.
func ModuleRoot() (string, error) {
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

// Message is what an error line on stderr says: the message of a JSON log
// line (a command whose logs are JSON writes its final error as one), or
// the line itself.
func Message(line string) string {
	var l struct {
		Message *string `json:"message"`
	}
	if json.Unmarshal([]byte(line), &l) == nil && l.Message != nil {
		return *l.Message
	}
	return line
}
