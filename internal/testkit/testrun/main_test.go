package main_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

func TestMain(m *testing.M) { cmdtest.Main(m) }

// make test's runner, on a module of three packages (one passing, one
// failing, one without tests), prints go test's lines and exit code, keeps
// a binary whose package did not change without linking it again, and
// links again the one whose package changed.
func TestTheRunnerLinksOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	runner := cmdtest.Build(t, "./internal/testkit/testrun")
	mod, bins := t.TempDir(), t.TempDir()
	for name, text := range map[string]string{
		"go.mod":            "module example.com/m\n\ngo 1.24\n",
		"good/good.go":      "package good\n\nfunc Two() int { return 2 }\n",
		"good/good_test.go": "package good\n\nimport \"testing\"\n\nfunc TestTwo(t *testing.T) {\n\tif Two() != 2 {\n\t\tt.Fatal(Two())\n\t}\n}\n",
		"bad/bad_test.go":   "package bad\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) { t.Log(\"the reason\"); t.Fail() }\n",
		"none/none.go":      "package none\n",
		"tool/main.go":      "package main\n\nfunc main() {}\n",
		"tool/tool_test.go": "package main\n\nimport (\n\t\"os\"\n\t\"path/filepath\"\n\t\"testing\"\n)\n\n" +
			"func TestTheRunnerBuiltMe(t *testing.T) {\n\tif _, err := os.Stat(filepath.Join(os.Getenv(\"CMDTEST_BINARIES\"), \"tool\")); err != nil {\n\t\tt.Fatal(err)\n\t}\n}\n",
	} {
		path := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testrun := func() (string, int) {
		t.Helper()
		cmd := exec.Command(runner, "-bin", bins, "./...")
		cmd.Dir = mod
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("testrun: %v", err)
			}
			code = exit.ExitCode()
		}
		return string(out), code
	}
	// A marker appended to a binary stays only where go test -c left the
	// file as it was: its build ID (in the ELF notes) still the right one.
	const marker = "\x00left as it was"
	mark := func(bin string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(bins, bin), os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(marker)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	marked := func(bin string) bool {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(bins, bin))
		if err != nil {
			t.Fatal(err)
		}
		return strings.HasSuffix(string(b), marker)
	}

	out, code := testrun()
	for _, line := range []string{
		`^\?   \texample\.com/m/none\t\[no test files\]$`,
		`^ok  \texample\.com/m/good\t[0-9.]+s$`,
		`^ok  \texample\.com/m/tool\t[0-9.]+s$`, // it found its binary where cmdtest.Build looks (cmdtest.BinariesEnv)
		`^FAIL\texample\.com/m/bad\t[0-9.]+s$`,
		`^FAIL$`,
		`the reason`,
	} {
		if !regexp.MustCompile(`(?m)` + line).MatchString(out) {
			t.Errorf("no line %s in the output:\n%s", line, out)
		}
	}
	if code != 1 {
		t.Errorf("exit %d with a failing package, want 1", code)
	}
	mark("good.test")
	mark("bad.test")

	if err := os.WriteFile(filepath.Join(mod, "bad/bad_test.go"), []byte("package bad\n\nimport \"testing\"\n\nfunc TestFixed(t *testing.T) {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = testrun()
	if code != 0 || strings.Contains(out, "FAIL") {
		t.Errorf("exit %d once every package passes, output:\n%s", code, out)
	}
	if !marked("good.test") {
		t.Error("the unchanged package's test binary was linked again")
	}
	if marked("bad.test") {
		t.Error("the changed package's test binary was not linked again")
	}

	if out, err := exec.Command(runner, "-bin", bins, "-clean").CombinedOutput(); err != nil {
		t.Fatalf("testrun -clean: %v\n%s", err, out)
	}
	if _, err := os.Stat(bins); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after testrun -clean, the binaries' folder: %v", err)
	}
}
