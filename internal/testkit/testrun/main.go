// Command testrun is `make test`'s test runner: `go test -count=1 ./...`
// without linking the test binaries again when nothing they hold changed.
//
// go test links every test binary on every run, cached packages or not:
// the suite's 50 binaries cost some 40 s of CPU before a test starts
// (docs/development.md, "The ninth pass"). testrun builds them with `go
// test -c -o DIR/`, which leaves a binary whose build ID is still right as
// it is, then runs each in its package's directory, as go test does, the
// longest-running first (their last durations are kept beside them), and
// prints go test's lines: `ok`, `FAIL` with the package's output, `?` for a
// package without tests, and a last `FAIL` when any failed (exit 1). The
// module's commands are built once too, with go build -o, for the tests
// that run them: cmdtest.Build takes them from there
// (cmdtest.BinariesEnv) instead of asking the go command in each test
// process.
//
//	go run ./internal/testkit/testrun [-race] [-p 2] [-parallel 4] [-run REGEXP] [packages]
//
// The binaries live in the user's cache directory
// (engagement-scheduler/test-binaries, about 1 GB a checkout); deleting it
// costs one full link.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// pkg is a package of the patterns given, and its test binary.
type pkg struct {
	ImportPath string
	Dir        string
	Main       bool   // a command
	Tests      bool   // it has _test.go files
	bin        string // its test binary, once built
}

// options are the runner's flags.
type options struct {
	race     bool
	procs    int
	parallel int
	run      string
	binDir   string
	clean    bool
}

func main() {
	var o options
	flag.BoolVar(&o.race, "race", false, "build the tests with the race detector")
	flag.IntVar(&o.procs, "p", runtime.NumCPU(), "test binaries run at once (go test's -p)")
	flag.IntVar(&o.parallel, "parallel", 4, "parallel tests within a binary (go test's -parallel)")
	flag.StringVar(&o.run, "run", "", "run only the tests matching this regular expression (go test's -run)")
	flag.StringVar(&o.binDir, "bin", "", "where the test binaries are kept (default: the user's cache directory)")
	flag.BoolVar(&o.clean, "clean", false, "remove the kept test binaries instead (make clean)")
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	if o.clean {
		if err := clean(o); err != nil {
			fmt.Fprintln(os.Stderr, "testrun:", err)
			os.Exit(2)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, o, patterns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		os.Exit(2)
	}
	if !ok {
		fmt.Println("FAIL")
		os.Exit(1)
	}
}

// run builds the test binaries of patterns and runs them, printing go
// test's lines; it reports whether every package passed.
func run(ctx context.Context, o options, patterns []string) (bool, error) {
	pkgs, err := list(ctx, patterns)
	if err != nil {
		return false, err
	}
	if o.binDir == "" {
		if o.binDir, err = defaultBinDir(o.race); err != nil {
			return false, err
		}
	}
	var tested []*pkg
	for _, p := range pkgs {
		if p.Tests {
			tested = append(tested, p)
		} else {
			fmt.Printf("?   \t%s\t[no test files]\n", p.ImportPath)
		}
	}
	if err := build(ctx, o, tested); err != nil {
		return false, err
	}
	if err := buildCommands(ctx, o, pkgs); err != nil {
		return false, err
	}
	durations := readDurations(o.binDir)
	slices.SortStableFunc(tested, func(a, b *pkg) int { // the longest first; a new package counts as long
		return cmp.Compare(durations.of(b.ImportPath), durations.of(a.ImportPath))
	})

	var (
		mu     sync.Mutex
		passed = true
		wg     sync.WaitGroup
		slots  = make(chan struct{}, max(1, o.procs))
	)
	for _, p := range tested {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			out, took, err := test(ctx, o, p)
			mu.Lock()
			defer mu.Unlock()
			durations[p.ImportPath] = took.Seconds()
			if err != nil {
				passed = false
				os.Stdout.Write(out)
				fmt.Printf("FAIL\t%s\t%.3fs\n", p.ImportPath, took.Seconds())
				return
			}
			fmt.Printf("ok  \t%s\t%.3fs\n", p.ImportPath, took.Seconds())
		})
	}
	wg.Wait()
	durations.write(o.binDir)
	return passed, ctx.Err()
}

// list is go list's view of patterns.
func list(ctx context.Context, patterns []string) ([]*pkg, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-json=ImportPath,Dir,Name,TestGoFiles,XTestGoFiles"}, patterns...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(patterns, " "), err)
	}
	var pkgs []*pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p struct {
			ImportPath, Dir, Name     string
			TestGoFiles, XTestGoFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		pkgs = append(pkgs, &pkg{ImportPath: p.ImportPath, Dir: p.Dir, Main: p.Name == "main",
			Tests: len(p.TestGoFiles)+len(p.XTestGoFiles) > 0})
	}
	return pkgs, nil
}

// build compiles and links the test binaries of pkgs into o.binDir with
// one go test -c, which links only those whose inputs changed. Its
// binaries are named after the last element of the import path, which must
// then be unique.
func build(ctx context.Context, o options, pkgs []*pkg) error {
	if len(pkgs) == 0 {
		return nil
	}
	byName := map[string]string{}
	args := []string{"test", "-c", "-o", o.binDir + string(filepath.Separator), "-ldflags=-s -w"}
	if o.race {
		args = append(args, "-race")
	}
	for _, p := range pkgs {
		name := path.Base(p.ImportPath) + ".test"
		if other, dup := byName[name]; dup {
			return fmt.Errorf("%s and %s would share the test binary %s: rename one package", other, p.ImportPath, name)
		}
		byName[name] = p.ImportPath
		p.bin = filepath.Join(o.binDir, name)
		args = append(args, p.ImportPath)
	}
	if err := os.MkdirAll(o.binDir, 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr // go test -c prints only what went wrong
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the test binaries (go test -c): %w", err)
	}
	return nil
}

// commandsDir is where buildCommands puts the module's commands.
func commandsDir(o options) string { return filepath.Join(o.binDir, "commands") }

// buildCommands builds the commands among pkgs into commandsDir with one
// go build, for the tests that run them (cmdtest.Build, told by
// cmdtest.BinariesEnv), as go build -o leaves an up-to-date binary as it
// is.
func buildCommands(ctx context.Context, o options, pkgs []*pkg) error {
	args := []string{"build", "-o", commandsDir(o) + string(filepath.Separator)} // without -race, as go run built them
	n := len(args)
	for _, p := range pkgs {
		if p.Main {
			args = append(args, p.ImportPath)
		}
	}
	if len(args) == n {
		return nil
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the commands the tests run (go build): %w", err)
	}
	return nil
}

// test runs p's test binary in p's directory, as go test does, and returns
// its output and how long it took.
func test(ctx context.Context, o options, p *pkg) ([]byte, time.Duration, error) {
	args := []string{"-test.paniconexit0", "-test.timeout=10m0s", "-test.count=1", fmt.Sprintf("-test.parallel=%d", o.parallel)}
	if o.run != "" {
		args = append(args, "-test.run="+o.run)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = p.Dir, &out, &out
	cmd.Env = append(os.Environ(), cmdtest.BinariesEnv+"="+commandsDir(o))
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) } // its cleanups stop what it started
	cmd.WaitDelay = 10 * time.Second
	began := time.Now()
	err := cmd.Run()
	return out.Bytes(), time.Since(began), err
}

// clean removes the test binaries kept for o (both build modes by
// default).
func clean(o options) error {
	dirs := []string{o.binDir}
	if o.binDir == "" {
		dirs = dirs[:0]
		for _, race := range []bool{false, true} {
			dir, err := defaultBinDir(race)
			if err != nil {
				return err
			}
			dirs = append(dirs, dir)
		}
	}
	for _, dir := range dirs {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}

// defaultBinDir is where this checkout's test binaries are kept: one
// folder per checkout and per build mode.
func defaultBinDir(race bool) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the test binaries (set -bin): %w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(wd))
	mode := "default"
	if race {
		mode = "race"
	}
	return filepath.Join(cache, "engagement-scheduler", "test-binaries", hex.EncodeToString(sum[:6]), mode), nil
}

// durations are the packages' last run times in seconds, kept beside
// their binaries to start the longest first.
type durations map[string]float64

const durationsFile = "durations.json"

func readDurations(dir string) durations {
	d := durations{}
	if b, err := os.ReadFile(filepath.Join(dir, durationsFile)); err == nil {
		_ = json.Unmarshal(b, &d) // a damaged file only costs the order
	}
	return d
}

// of is p's last duration; a package never run counts as the longest.
func (d durations) of(p string) float64 {
	if s, ok := d[p]; ok {
		return s
	}
	return 1e9
}

func (d durations) write(dir string) {
	b, err := json.MarshalIndent(d, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, durationsFile), b, 0o644)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(os.Stderr, "testrun: keeping the durations:", err)
	}
}
