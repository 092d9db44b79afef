package scheduler

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Each daily step's statement file matches the state machine's table: the
// transition its header names is the table's row for its state and trigger,
// the step runs it with that row's states and trigger as parameters, the
// file takes them from those parameters (no state or trigger spelled out in
// its SQL), it queues a message exactly when the row does, and every time
// trigger of the table has a step.
func TestDailyStepFilesMatchTheStateMachine(t *testing.T) {
	t.Parallel()
	steps, err := dailySteps(false)
	if err != nil {
		t.Fatal(err)
	}
	header := regexp.MustCompile(`^-- Step (\w+): (\w+) -(\w+)-> (\w+)`)
	var triggers []sm.Trigger
	for i, d := range dailyStepFiles {
		st := steps[i]
		tr, err := sm.Next(d.from, d.trigger)
		if err != nil {
			t.Fatalf("step %s: %v", d.file, err)
		}
		triggers = append(triggers, tr.Trigger)
		for _, file := range []string{d.file, d.file + "_dry_run"} {
			sql := sqlfile.Must(queryFiles, file)
			if file == d.file {
				m := header.FindStringSubmatch(sql)
				want := []string{string(tr.Trigger), string(tr.From), string(tr.Trigger), string(tr.To)}
				if m == nil || !slices.Equal(m[1:], want) {
					t.Errorf("%s.sql's first line names %q, want \"-- Step %s: %s -%s-> %s\" (the state machine's row)",
						file, m, want[0], want[1], want[2], want[3])
				}
			}
			code := withoutComments(sql)
			for _, p := range []string{"@from_state"} {
				if !strings.Contains(code, p) {
					t.Errorf("%s.sql does not use %s", file, p)
				}
			}
			for _, s := range sm.States() {
				if strings.Contains(code, "'"+string(s)+"'") {
					t.Errorf("%s.sql spells out state %q: states come from the state machine, as parameters", file, s)
				}
			}
			for _, trig := range sm.Triggers() {
				if strings.Contains(code, "'"+string(trig)+"'") {
					t.Errorf("%s.sql spells out trigger %q: triggers come from the state machine, as parameters", file, trig)
				}
			}
		}
		code := withoutComments(st.moveSQL)
		for _, p := range []string{"@to_state", "@trigger", "INSERT INTO engagement_state_transitions"} {
			if !strings.Contains(code, p) {
				t.Errorf("%s.sql does not use %s", d.file, p)
			}
		}
		if got := fmt.Sprint(st.args["from_state"], st.args["trigger"], st.args["to_state"]); got != fmt.Sprint(tr.From, tr.Trigger, tr.To) {
			t.Errorf("step %s runs with from/trigger/to %s, want the table's %s %s %s", st.name, got, tr.From, tr.Trigger, tr.To)
		}
		queues := strings.Contains(code, "INSERT INTO engagement_message_queue")
		if tr.Trigger == sm.ReminderDue { // queues only when told to (--send-reminder), off here
			queues = queues && !strings.Contains(code, "@send_reminder")
		}
		if queues != (tr.Message == sm.GoodbyeMessage) || (st.messageType != "") != queues {
			t.Errorf("%s.sql queues a message: %v; the table's row queues %q and the step's message type is %q",
				d.file, queues, tr.Message, st.messageType)
		}
	}
	// The time triggers (those the bot does not fire) each have a step.
	for _, tr := range sm.Transitions() {
		timed := tr.Trigger == sm.Inactivity14d || tr.Trigger == sm.GoodbyeTimeout || tr.Trigger == sm.ReminderDue
		if timed && !slices.Contains(triggers, tr.Trigger) {
			t.Errorf("the table's %s -%s-> %s has no daily step", tr.From, tr.Trigger, tr.To)
		}
	}
}

// withoutComments drops the -- comments of a statement file.
func withoutComments(sql string) string {
	var b strings.Builder
	for line := range strings.Lines(sql) {
		code, _, _ := strings.Cut(line, "--")
		b.WriteString(code + "\n")
	}
	return b.String()
}

// The shard expression is written out in every statement that takes the
// shard; every copy must assign users exactly as the others do.
func TestStatementFilesShareOneShardAssignment(t *testing.T) {
	t.Parallel()
	const assignment = "(@shard_count::int = 1\n" +
		"OR ((hashtextextended(s.user_id::text, 0) & 9223372036854775807) % @shard_count::int) = @shard_index::int)"
	squash := regexp.MustCompile(`\s+`)
	want := squash.ReplaceAllString(assignment, " ")
	for _, name := range sqlfile.Names(queryFiles) {
		code := squash.ReplaceAllString(withoutComments(sqlfile.Must(queryFiles, name)), " ")
		uses := strings.Count(code, "@shard_count")
		if uses == 0 {
			continue
		}
		if n := strings.Count(code, want); n == 0 || uses != 2*n {
			t.Errorf("%s.sql uses @shard_count %d times, %d of them in the shard assignment %q; want every use in it",
				name, uses, 2*n, want)
		}
	}
}
