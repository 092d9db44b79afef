package receiver_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// The npm package's own tests (test/*.test.js, Node's test runner) pass
// against a fresh migrated database: fire over the real engagement_fire
// (every bot move, every error class, a repeated request key, every state
// × trigger pair of the Go table, given as ENGAGEMENT_TABLE) and the
// receiver (the signature check, de-duplication in PostgreSQL). Every test
// the files declare must run and pass: none skipped, none left out.
func TestTheNpmPackagesTestsPass(t *testing.T) {
	t.Parallel()
	nodeReady(t)
	files, err := filepath.Glob(filepath.Join("test", "*.test.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test/*.test.js (%v)", err)
	}
	declared := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		declared += len(regexp.MustCompile(`(?m)^\s*it\(`).FindAll(src, -1))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"--test", "--test-reporter=tap"}, files...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+pgtest.NewDatabase(t), "ENGAGEMENT_TABLE="+goTable(t))
	out, err := cmd.CombinedOutput()
	tap := string(out)
	summary := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$`).FindAllStringSubmatch(tap, -1) {
		summary[m[1]], _ = strconv.Atoi(m[2])
	}
	skipped := regexp.MustCompile(`(?m)^\s*ok \d+ - .*# (SKIP|TODO)`).FindAllString(tap, -1)
	if err != nil || summary["pass"] != declared || summary["fail"]+summary["cancelled"]+summary["skipped"]+summary["todo"] != 0 || len(skipped) != 0 {
		t.Fatalf("node --test %s: %v; %v, skipped %q; want all %d tests passed. Its output:\n%s",
			strings.Join(files, " "), err, summary, skipped, declared, tap)
	}
	t.Logf("node --test: %d tests passed", summary["pass"])
}

// goTable is the state machine's table as JSON: the states, the triggers
// and the moves.
func goTable(t *testing.T) string {
	t.Helper()
	type move struct {
		From    string `json:"from"`
		Trigger string `json:"trigger"`
		To      string `json:"to"`
	}
	var table struct {
		States      []string `json:"states"`
		Triggers    []string `json:"triggers"`
		Transitions []move   `json:"transitions"`
	}
	for _, s := range sm.States() {
		table.States = append(table.States, string(s))
	}
	for _, tr := range sm.Triggers() {
		table.Triggers = append(table.Triggers, string(tr))
	}
	for _, tr := range sm.Transitions() {
		table.Transitions = append(table.Transitions, move{string(tr.From), string(tr.Trigger), string(tr.To)})
	}
	b, err := json.Marshal(table)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
