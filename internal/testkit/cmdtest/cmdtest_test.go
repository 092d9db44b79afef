package cmdtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// childEnv makes this test binary, run again by a test below, act as a test
// process that builds a binary: "exit" ends normally, "hang" waits to be
// killed after printing the binary's path.
const childEnv = "CMDTEST_CHILD"

// TestChildBuilds is the child's side of the tests below; run on its own it
// does nothing.
func TestChildBuilds(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		return
	}
	bin := Build(t, "./internal/testkit/cmdtest/testdata/hello")
	if res := Run(t, bin, Env()); res.Code != 0 || !strings.Contains(res.Stdout, "hello") {
		t.Fatalf("the built binary: %+v", res)
	}
	os.Stdout.WriteString("binary: " + bin + "\n")
	if mode == "hang" {
		select {} // until killed
	}
}

// child starts this test binary as a test process building a binary in tmp
// and returns it with the path of the binary it built, once built.
func child(t *testing.T, tmp, mode string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildBuilds$", "-test.count=1") //nolint:gosec // this test binary itself
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode, "TMPDIR="+tmp), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if bin, ok := strings.CutPrefix(sc.Text(), "binary: "); ok {
			go func() { _, _ = bufio.NewReader(out).WriteTo(os.Stderr) }()
			return cmd, bin
		}
	}
	_ = cmd.Wait()
	t.Fatalf("the child test process printed no binary (%v)", cmd.ProcessState)
	return nil, ""
}

// binFolders lists the folders of binaries under tmp.
func binFolders(t *testing.T, tmp string) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(tmp, binPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// A test process that make test's runner started (BinariesEnv set) takes
// the binary the runner built, without the go command.
func TestBuildTakesTheRunnersBinary(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		return
	}
	t.Parallel()
	runners := t.TempDir()
	const script = "#!/bin/sh\necho hello from the runner\n"
	if err := os.WriteFile(filepath.Join(runners, "hello"), []byte(script), 0o755); err != nil { //nolint:gosec // an executable
		t.Fatal(err)
	}
	cmd, bin := child(t, t.TempDir(), "hang", BinariesEnv+"="+runners)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	got, err := os.ReadFile(bin) //nolint:gosec // the child's binary
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != script {
		t.Errorf("Build gave the test process a binary of %d bytes, not the runner's script", len(got))
	}
}

// TestTestProcessesLeaveNoBinariesBehind (issue 18, item 8: 37
// /tmp/engagement-bin-* folders, 760 MB, after one CI run): a test process
// that ends removes the binaries it built, and one killed with SIGKILL
// (which runs no cleanup) has its folder removed by the next test process
// that builds.
func TestTestProcessesLeaveNoBinariesBehind(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		return
	}
	t.Parallel()
	tmp := t.TempDir()

	cmd, bin := child(t, tmp, "exit")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the child test process: %v", err)
	}
	if !strings.HasPrefix(bin, tmp+string(os.PathSeparator)) {
		t.Fatalf("the binary %s was built outside TMPDIR %s", bin, tmp)
	}
	if _, err := os.Stat(bin); !os.IsNotExist(err) {
		t.Errorf("the binary %s is still there after its test process ended (%v)", bin, err)
	}
	if left := binFolders(t, tmp); len(left) > 0 {
		t.Errorf("folders of binaries left after the test process ended: %v", left)
	}

	killed, bin := child(t, tmp, "hang")
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the killed process's binary %s: %v; want it left behind, for the next process to sweep", bin, err)
	}
	next, _ := child(t, tmp, "exit")
	if err := next.Wait(); err != nil {
		t.Fatalf("the next child test process: %v", err)
	}
	if left := binFolders(t, tmp); len(left) > 0 {
		t.Errorf("folders of binaries left after a killed process and the next one: %v", left)
	}
}

// TestSweep: folders of processes that are gone are removed, those of
// running processes and anything else are left.
func TestSweep(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	self := strconv.Itoa(os.Getpid())
	folders := []struct {
		name string
		age  time.Duration
		kept bool
	}{
		{binPrefix + "pid" + strconv.Itoa(gone.Process.Pid) + "-1", time.Minute, false},
		{binPrefix + "pid" + self + "-2", time.Minute, true},
		{binPrefix + "pid" + self + "-3", 25 * time.Hour, false}, // the PID was reused
		{binPrefix + "1023350412", 2 * time.Hour, false},         // the old naming
		{binPrefix + "1026287601", time.Minute, true},
		{"engagement-pgtest", 48 * time.Hour, true},
	}
	for _, f := range folders {
		path := filepath.Join(tmp, f.name)
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, now.Add(-f.age), now.Add(-f.age)); err != nil {
			t.Fatal(err)
		}
	}
	sweep(tmp, now)
	for _, f := range folders {
		_, err := os.Stat(filepath.Join(tmp, f.name))
		if kept := err == nil; kept != f.kept {
			t.Errorf("%s (age %s): kept = %v, want %v", f.name, f.age, kept, f.kept)
		}
	}
}
