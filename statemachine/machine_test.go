package statemachine_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// The recipe's win-back (docs/development.md, "Adding a message kind with
// its own time trigger") as an extension of the shipped machine.
const winBack sm.Trigger = "dormant_win_back"

func winBackExtension() sm.Extension {
	return sm.Extension{
		Triggers:    []sm.Trigger{winBack},
		Transitions: []sm.Transition{{From: sm.Dormant, Trigger: winBack, To: sm.Dormant, Clock: sm.StateEntered, Wait: 30 * 24 * time.Hour}},
		Kinds: []sm.Kind{{Message: "win_back", CatalogKey: "engagement.win_back.miss_you", Trigger: winBack,
			KeyInfix: ":win_back:", Period: sm.PerDay, SendWhile: []sm.State{sm.Dormant}, Category: sm.CategoryMarketing}},
	}
}

// Issue 60: With adds the recipe's rows after the shipped ones, the
// timer last among the daily job's steps with its kind as its message,
// and leaves Default as it was.
func TestWithAddsTheRecipesRows(t *testing.T) {
	t.Parallel()
	m, err := sm.Default.With(winBackExtension())
	if err != nil {
		t.Fatal(err)
	}
	timers := m.Timers()
	if last := timers[len(timers)-1]; last.Trigger != winBack || last.Message != "win_back" || len(timers) != len(sm.Timers())+1 {
		t.Errorf("the timers end with %+v (%d of them), want the win-back's row, queueing win_back, after the shipped %d",
			last, len(timers), len(sm.Timers()))
	}
	if tr, err := m.Next(sm.Dormant, winBack); err != nil || tr.To != sm.Dormant {
		t.Errorf("Next(dormant, %s) = %+v, %v", winBack, tr, err)
	}
	d := m.DeadlineArgs()
	if i := slices.Index(d.TimerTriggers, string(winBack)); i < 0 || d.TimerClocks[i] != "state_entered" || d.TimerWaits[i] != 30*24*time.Hour {
		t.Errorf("the deadlines lack the win-back's: %+v", d)
	}
	if _, ok := sm.KindOf("win_back"); ok || slices.Contains(sm.Triggers(), winBack) {
		t.Error("extending the machine changed Default")
	}
}

// With refuses what does not fit the tables, as TestKindsAreWhole does
// for the shipped ones.
func TestWithRefusesRowsThatDoNotFit(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(*sm.Extension){
		"a shipped trigger":     func(e *sm.Extension) { e.Triggers = []sm.Trigger{sm.ReminderDue} },
		"an undeclared trigger": func(e *sm.Extension) { e.Triggers = nil },
		"a second row of an edge": func(e *sm.Extension) {
			e.Transitions = append(e.Transitions, sm.Transition{From: sm.Dormant, Trigger: sm.UserMessage, To: sm.Active})
		},
		"rows that disagree on the wait": func(e *sm.Extension) {
			e.Transitions = append(e.Transitions, sm.Transition{From: sm.RemindLater, Trigger: winBack, To: sm.Dormant, Clock: sm.StateEntered})
		},
		"an unknown clock":      func(e *sm.Extension) { e.Transitions[0].Clock = "sunrise" },
		"a kind's shipped name": func(e *sm.Extension) { e.Kinds[0].Message = sm.GoodbyeMessage },
		"no category":           func(e *sm.Extension) { e.Kinds[0].Category = "" },
		"no send-time state":    func(e *sm.Extension) { e.Kinds[0].SendWhile = nil },
		"a second kind of a trigger": func(e *sm.Extension) {
			e.Kinds = append(e.Kinds, sm.Kind{Message: "win_back_2", CatalogKey: "k", Trigger: winBack, KeyInfix: ":wb2:",
				Period: sm.PerDay, SendWhile: []sm.State{sm.Dormant}, Category: sm.CategoryMarketing})
		},
	} {
		e := winBackExtension()
		change(&e)
		if _, err := sm.Default.With(e); !errors.Is(err, sm.ErrInvalidExtension) {
			t.Errorf("%s: With = %v, want ErrInvalidExtension", name, err)
		}
	}
}
