package docgen_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// readmeTable returns the rows of the README's first table whose header
// row is header, as cells.
func readmeTable(t *testing.T, readme, header string) [][]string {
	t.Helper()
	_, after, ok := strings.Cut(readme, header+"\n")
	if !ok {
		t.Fatalf("README.md has no table headed %q", header)
	}
	var rows [][]string
	for i, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i == 0 { // the |---| line
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), " | ") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}

// TestTheREADMEFollowsTheTables holds the README's tables to package
// statemachine's, which it writes out by hand for a first reader: the
// States table has one row per trigger, with the trigger's from-states
// (or "any state"), its to-state, the kind it queues, its wait, and who
// fires it; the binaries table's engagement-daily row says every timer's
// wait. A trigger added by the recipe (docs/development.md) fails here,
// naming the row to write, until the README has it.
func TestTheREADMEFollowsTheTables(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	states := readmeTable(t, readme, "| from | trigger | to | fired by |")
	scheduled := map[sm.Trigger]bool{}
	for _, tm := range sm.Timers() {
		scheduled[tm.Trigger] = true
	}
	scheduled[sm.GoodbyeUndelivered] = true // goodbye_timeout's step fires it
	var listed []string
	for _, trig := range sm.Triggers() {
		var rows []sm.Transition
		for _, tr := range sm.Transitions() {
			if tr.Trigger == trig {
				rows = append(rows, tr)
			}
		}
		var row []string
		for _, r := range states {
			if len(r) == 4 && strings.HasPrefix(r[1], "`"+string(trig)+"`") {
				row = r
			}
		}
		if row == nil {
			t.Errorf("README.md's States table has no row for trigger %s (from %s to %s): add one", trig, rows[0].From, rows[0].To)
			continue
		}
		listed = append(listed, string(trig))
		from := map[string]bool{}
		for _, r := range rows {
			from[string(r.From)] = true
		}
		if len(from) == len(sm.States()) {
			if row[0] != "any state" {
				t.Errorf("README.md, %s: from %q, want \"any state\" (the table moves every state)", trig, row[0])
			}
		} else {
			var want []string
			for f := range from {
				want = append(want, "`"+f+"`")
			}
			got := strings.Split(row[0], ", ")
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("README.md, %s: from %s, want %s", trig, row[0], strings.Join(want, ", "))
			}
		}
		if !strings.HasPrefix(row[2], "`"+string(rows[0].To)+"`") {
			t.Errorf("README.md, %s: to %q, want it to start with `%s`", trig, row[2], rows[0].To)
		}
		if k, ok := sm.KindFiredBy(trig); ok && !strings.Contains(row[2], string(k.Message)) {
			t.Errorf("README.md, %s: to %q does not say it queues the %s", trig, row[2], k.Message)
		}
		if w := rows[0].Wait; w > 0 && !strings.Contains(row[1], sm.FormatWait(w)) {
			t.Errorf("README.md, %s: %q does not say its wait, %s", trig, row[1], sm.FormatWait(w))
		}
		if scheduled[trig] && row[3] != "`engagement-daily`" {
			t.Errorf("README.md, %s: fired by %q, want `engagement-daily`", trig, row[3])
		}
		if !scheduled[trig] && !strings.HasPrefix(row[3], "the bot") {
			t.Errorf("README.md, %s: fired by %q, want the bot: `engagement_fire(id, '%s')`", trig, row[3], trig)
		}
	}
	if len(states) != len(listed) {
		t.Errorf("README.md's States table has %d rows, the state machine %d triggers (%s)", len(states), len(listed), strings.Join(listed, ", "))
	}

	var daily []string
	for _, r := range readmeTable(t, readme, "| binary | what it does | shipped schedule (UTC) |") {
		if strings.HasPrefix(r[0], "[`engagement-daily`]") {
			daily = r
		}
	}
	if daily == nil {
		t.Fatal("README.md's binaries table has no engagement-daily row")
	}
	for _, tm := range sm.Timers() {
		if tm.Wait > 0 && !strings.Contains(daily[1], sm.FormatWait(tm.Wait)) {
			t.Errorf("README.md, the engagement-daily row does not say %s's wait, %s: %q", tm.Trigger, sm.FormatWait(tm.Wait), daily[1])
		}
	}
}
