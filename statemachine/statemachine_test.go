package statemachine_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

func TestNextValid(t *testing.T) {
	tests := []struct {
		from    sm.State
		trigger sm.Trigger
		to      sm.State
		message sm.Message
	}{
		{sm.Active, sm.Inactivity14d, sm.GoodbyeSent, sm.GoodbyeMessage},
		{sm.Active, sm.UserMessage, sm.Active, sm.NoMessage},
		{sm.GoodbyeSent, sm.GoodbyeTimeout, sm.Dormant, sm.NoMessage},
		{sm.GoodbyeSent, sm.GoodbyeUndelivered, sm.Active, sm.NoMessage},
		{sm.GoodbyeSent, sm.GoodbyeAnswerHelp, sm.HelpFlow, sm.NoMessage},
		{sm.GoodbyeSent, sm.GoodbyeAnswerRemindLater, sm.RemindLater, sm.NoMessage},
		{sm.GoodbyeSent, sm.GoodbyeAnswerDormant, sm.Dormant, sm.NoMessage},
		{sm.GoodbyeSent, sm.UserMessage, sm.Active, sm.NoMessage},
		{sm.HelpFlow, sm.Inactivity14d, sm.GoodbyeSent, sm.GoodbyeMessage},
		{sm.HelpFlow, sm.UserMessage, sm.Active, sm.NoMessage},
		{sm.RemindLater, sm.ReminderDue, sm.Dormant, sm.NoMessage},
		{sm.RemindLater, sm.UserMessage, sm.Active, sm.NoMessage},
		{sm.Dormant, sm.UserMessage, sm.Active, sm.NoMessage},
	}
	for _, tt := range tests {
		t.Run(string(tt.from)+"/"+string(tt.trigger), func(t *testing.T) {
			got, err := sm.Next(tt.from, tt.trigger)
			if err != nil {
				t.Fatalf("Next(%q, %q) error = %v, want a valid transition", tt.from, tt.trigger, err)
			}
			if got.From != tt.from || got.Trigger != tt.trigger || got.To != tt.to || got.Message != tt.message {
				t.Errorf("Next(%q, %q) = %+v, want to %s queueing %q", tt.from, tt.trigger, got, tt.to, tt.message)
			}
			if !slices.Contains(sm.Transitions(), got) {
				t.Errorf("Transitions() does not list %+v", got)
			}
		})
	}
}

func TestTransitionsTable(t *testing.T) {
	seen := map[[2]string]bool{}
	for _, tr := range sm.Transitions() {
		key := [2]string{string(tr.From), string(tr.Trigger)}
		if seen[key] {
			t.Errorf("Transitions() lists (%q, %q) twice", tr.From, tr.Trigger)
		}
		seen[key] = true
		if !tr.From.Valid() || !tr.To.Valid() || !tr.Trigger.Valid() {
			t.Errorf("Transitions() row %+v uses an unknown state or trigger", tr)
		}
		if (tr.Message == sm.GoodbyeMessage) != (tr.Trigger == sm.Inactivity14d) {
			t.Errorf("row %+v: only inactivity_14d may queue the goodbye message, and it must", tr)
		}
	}
	for _, s := range sm.States() {
		got, err := sm.Next(s, sm.UserMessage)
		if err != nil || got.To != sm.Active {
			t.Errorf("Next(%q, user_message) = %+v, %v; want a transition to active from every state", s, got, err)
		}
	}
	if a, b := sm.Transitions(), sm.Transitions(); !slices.Equal(a, b) {
		t.Errorf("Transitions() order is not deterministic: %v then %v", a, b)
	}
}

// The timers are whole: every row of a trigger has one clock and one wait
// and one to-state (the daily job moves them in one step), the bot's
// triggers have none, and the contract's timers are there (a new timer
// needs no edit here).
func TestTimers(t *testing.T) {
	bot := []sm.Trigger{sm.UserMessage, sm.GoodbyeAnswerHelp, sm.GoodbyeAnswerRemindLater, sm.GoodbyeAnswerDormant, sm.GoodbyeUndelivered}
	first := map[sm.Trigger]sm.Transition{}
	for _, tr := range sm.Transitions() {
		if slices.Contains(bot, tr.Trigger) && (tr.Clock != sm.NoClock || tr.Wait != 0) {
			t.Errorf("row %+v: %s is not a timer, but has a clock or a wait", tr, tr.Trigger)
		}
		if tr.Clock == sm.NoClock && tr.Wait != 0 {
			t.Errorf("row %+v: a wait without a clock", tr)
		}
		f, seen := first[tr.Trigger]
		if !seen {
			first[tr.Trigger] = tr
			continue
		}
		if f.Clock != tr.Clock || f.Wait != tr.Wait || (tr.Clock != sm.NoClock && f.To != tr.To) {
			t.Errorf("rows %+v and %+v of one timer disagree on its clock, wait or to-state", f, tr)
		}
	}
	var got []string
	for _, tr := range sm.Timers() {
		got = append(got, string(tr.Trigger)+" "+tr.When())
	}
	want := []string{
		"inactivity_14d 14 days after the last activity",
		"goodbye_timeout 48 h after the goodbye's delivery",
		"reminder_due at remind_at",
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("Timers() = %q, want it to hold %q", got, w)
		}
	}
	if got := sm.Inactivity14d.Wait(); got != sm.InactivityPeriod {
		t.Errorf("inactivity_14d waits %v, want InactivityPeriod", got)
	}
	if got := sm.GoodbyeTimeout.Wait(); got != sm.GoodbyeWindow {
		t.Errorf("goodbye_timeout waits %v, want GoodbyeWindow", got)
	}
	if got, _ := sm.Next(sm.HelpFlow, sm.Inactivity14d); !slices.Equal(got.FromStates(), []sm.State{sm.HelpFlow, sm.Active}) {
		t.Errorf("help_flow's inactivity moves %v together, want help_flow and active", got.FromStates())
	}
}

func TestTransitionsReturnsCopy(t *testing.T) {
	got := sm.Transitions()
	orig := got[0]
	got[0] = sm.Transition{From: sm.Dormant, Trigger: sm.ReminderDue, To: sm.HelpFlow, Message: "spam"}
	if again := sm.Transitions()[0]; again != orig {
		t.Errorf("after mutating the returned slice, Transitions()[0] = %+v, want unchanged %+v", again, orig)
	}
	if _, err := sm.Next(sm.Dormant, sm.ReminderDue); err == nil {
		t.Error("Next(dormant, reminder_due) succeeded after mutating Transitions()'s result; the table must not be shared")
	}
	states := sm.States()
	states[0] = "x"
	if sm.States()[0] != sm.Active {
		t.Error("States() must return a fresh slice; mutating it changed the next result")
	}
	triggers := sm.Triggers()
	triggers[0] = "x"
	if sm.Triggers()[0] != sm.Inactivity14d {
		t.Error("Triggers() must return a fresh slice; mutating it changed the next result")
	}
}

func TestNextInvalidPairs(t *testing.T) {
	valid := map[sm.Transition]bool{}
	for _, tr := range sm.Transitions() {
		valid[sm.Transition{From: tr.From, Trigger: tr.Trigger}] = true
	}
	invalid := 0
	for _, s := range sm.States() {
		for _, trig := range sm.Triggers() {
			if valid[sm.Transition{From: s, Trigger: trig}] {
				continue
			}
			invalid++
			got, err := sm.Next(s, trig)
			if err == nil {
				t.Errorf("Next(%q, %q) = %+v, want an invalid-transition error", s, trig, got)
				continue
			}
			checkTransitionError(t, err, s, trig)
			want := `invalid transition: trigger "` + string(trig) + `" does not apply to state "` + string(s) + `"`
			if err.Error() != want {
				t.Errorf("Next(%q, %q) error = %q, want %q", s, trig, err, want)
			}
			if got != (sm.Transition{}) {
				t.Errorf("Next(%q, %q) returned %+v with its error, want the zero Transition", s, trig, got)
			}
			if c, err := sm.Fire(s, trig, time.Now()); err == nil {
				t.Errorf("Fire(%q, %q) = %+v, want an error", s, trig, c)
			} else {
				checkTransitionError(t, err, s, trig)
			}
		}
	}
	if want := len(sm.States())*len(sm.Triggers()) - len(sm.Transitions()); invalid != want {
		t.Errorf("checked %d invalid pairs, want %d", invalid, want)
	}
}

func checkTransitionError(t *testing.T, err error, from sm.State, trig sm.Trigger) {
	t.Helper()
	if !errors.Is(err, sm.ErrInvalidTransition) {
		t.Errorf("(%q, %q): error %v does not match ErrInvalidTransition with errors.Is", from, trig, err)
	}
	var te *sm.TransitionError
	if !errors.As(err, &te) {
		t.Errorf("(%q, %q): error %v (%T) is not a *TransitionError", from, trig, err, err)
		return
	}
	if te.From != from || te.Trigger != trig {
		t.Errorf("TransitionError = {From: %q, Trigger: %q}, want {From: %q, Trigger: %q}", te.From, te.Trigger, from, trig)
	}
}

func TestNextUnknownValues(t *testing.T) {
	tests := []struct {
		name    string
		from    sm.State
		trigger sm.Trigger
		wantMsg string
	}{
		{"unknown state", "asleep", sm.UserMessage, `unknown state "asleep"`},
		{"empty state", "", sm.UserMessage, `unknown state ""`},
		{"unknown trigger", sm.Active, "poke", `unknown trigger "poke"`},
		{"empty trigger", sm.Dormant, "", `unknown trigger ""`},
		{"case matters", "ACTIVE", "USER_MESSAGE", `unknown state "ACTIVE"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sm.Next(tt.from, tt.trigger)
			if err == nil {
				t.Fatalf("Next(%q, %q) succeeded, want an error", tt.from, tt.trigger)
			}
			checkTransitionError(t, err, tt.from, tt.trigger)
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Next(%q, %q) error = %q, want it to contain %q", tt.from, tt.trigger, err, tt.wantMsg)
			}
		})
	}
}

func TestParseState(t *testing.T) {
	want := []sm.State{sm.Active, sm.GoodbyeSent, sm.HelpFlow, sm.RemindLater, sm.Dormant}
	if got := sm.States(); !slices.Equal(got, want) {
		t.Errorf("States() = %v, want %v", got, want)
	}
	for _, s := range sm.States() {
		if !s.Valid() {
			t.Errorf("%q.Valid() = false, want true", s)
		}
		got, err := sm.ParseState(s.String())
		if err != nil || got != s {
			t.Errorf("ParseState(%q) = %q, %v; want %q, nil", s.String(), got, err, s)
		}
	}
	for _, in := range []string{"", "Active", "sleeping", " active", "goodbye-sent"} {
		t.Run("unknown "+in, func(t *testing.T) {
			got, err := sm.ParseState(in)
			if err == nil {
				t.Fatalf("ParseState(%q) = %q, nil; want an error", in, got)
			}
			if !errors.Is(err, sm.ErrUnknownState) {
				t.Errorf("ParseState(%q) error %v does not wrap ErrUnknownState", in, err)
			}
			if quoted := `"` + in + `"`; !strings.Contains(err.Error(), quoted) {
				t.Errorf("ParseState(%q) error = %q, want it to name the value %s", in, err, quoted)
			}
			if sm.State(in).Valid() {
				t.Errorf("State(%q).Valid() = true, want false", in)
			}
		})
	}
}

func TestParseTrigger(t *testing.T) {
	want := []sm.Trigger{
		sm.Inactivity14d, sm.GoodbyeTimeout, sm.GoodbyeUndelivered, sm.ReminderDue,
		sm.UserMessage, sm.GoodbyeAnswerHelp, sm.GoodbyeAnswerRemindLater, sm.GoodbyeAnswerDormant,
	}
	// A trigger may be added (the contract is extended, never broken),
	// but these stay, in this order.
	var got []sm.Trigger
	for _, tr := range sm.Triggers() {
		if slices.Contains(want, tr) {
			got = append(got, tr)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Triggers() = %v, want %v among them, in this order", sm.Triggers(), want)
	}
	// The stored strings are a public contract.
	contract := map[sm.Trigger]string{
		sm.Inactivity14d:            "inactivity_14d",
		sm.GoodbyeTimeout:           "goodbye_timeout",
		sm.GoodbyeUndelivered:       "goodbye_undelivered",
		sm.ReminderDue:              "reminder_due",
		sm.UserMessage:              "user_message",
		sm.GoodbyeAnswerHelp:        "goodbye_answer_help",
		sm.GoodbyeAnswerRemindLater: "goodbye_answer_remind_later",
		sm.GoodbyeAnswerDormant:     "goodbye_answer_dormant",
	}
	for _, tr := range want {
		if got, want := tr.String(), contract[tr]; got != want {
			t.Errorf("trigger String() = %q, want the contract value %q", got, want)
		}
		if !tr.Valid() {
			t.Errorf("%q.Valid() = false, want true", tr)
		}
		got, err := sm.ParseTrigger(tr.String())
		if err != nil || got != tr {
			t.Errorf("ParseTrigger(%q) = %q, %v; want %q, nil", tr.String(), got, err, tr)
		}
	}
	for _, in := range []string{"", "inactivity", "User_Message", "goodbye_answer"} {
		t.Run("unknown "+in, func(t *testing.T) {
			got, err := sm.ParseTrigger(in)
			if err == nil {
				t.Fatalf("ParseTrigger(%q) = %q, nil; want an error", in, got)
			}
			if !errors.Is(err, sm.ErrUnknownTrigger) {
				t.Errorf("ParseTrigger(%q) error %v does not wrap ErrUnknownTrigger", in, err)
			}
			if quoted := `"` + in + `"`; !strings.Contains(err.Error(), quoted) {
				t.Errorf("ParseTrigger(%q) error = %q, want it to name the value %s", in, err, quoted)
			}
			if sm.Trigger(in).Valid() {
				t.Errorf("Trigger(%q).Valid() = true, want false", in)
			}
		})
	}
}

func TestDurations(t *testing.T) {
	tests := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"InactivityPeriod", sm.InactivityPeriod, 336 * time.Hour},
		{"GoodbyeWindow", sm.GoodbyeWindow, 48 * time.Hour},
		{"RemindLaterPeriod", sm.RemindLaterPeriod, 336 * time.Hour},
		{"WeeklyWindow", sm.WeeklyWindow, 168 * time.Hour},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestFireTimestamps(t *testing.T) {
	at := time.Date(2025, 3, 1, 9, 30, 15, 123456789, time.UTC)
	ptr := func(t time.Time) *time.Time { return &t }
	tests := []struct {
		from        sm.State
		trigger     sm.Trigger
		sentAt      *time.Time
		expiresAt   *time.Time
		remindAt    *time.Time
		wantMessage sm.Message
	}{
		{sm.Active, sm.Inactivity14d, ptr(at), ptr(at.Add(48 * time.Hour)), nil, sm.GoodbyeMessage},
		{sm.GoodbyeSent, sm.GoodbyeAnswerRemindLater, nil, nil, ptr(at.AddDate(0, 0, 14)), sm.NoMessage},
		{sm.Active, sm.UserMessage, nil, nil, nil, sm.NoMessage},
		{sm.GoodbyeSent, sm.GoodbyeTimeout, nil, nil, nil, sm.NoMessage},
		{sm.GoodbyeSent, sm.GoodbyeAnswerHelp, nil, nil, nil, sm.NoMessage},
		{sm.GoodbyeSent, sm.GoodbyeAnswerDormant, nil, nil, nil, sm.NoMessage},
		{sm.GoodbyeSent, sm.UserMessage, nil, nil, nil, sm.NoMessage},
		{sm.HelpFlow, sm.UserMessage, nil, nil, nil, sm.NoMessage},
		{sm.RemindLater, sm.ReminderDue, nil, nil, nil, sm.NoMessage},
		{sm.RemindLater, sm.UserMessage, nil, nil, nil, sm.NoMessage},
		{sm.Dormant, sm.UserMessage, nil, nil, nil, sm.NoMessage},
	}
	for _, tt := range tests {
		t.Run(string(tt.from)+"/"+string(tt.trigger), func(t *testing.T) {
			c, err := sm.Fire(tt.from, tt.trigger, at)
			if err != nil {
				t.Fatalf("Fire(%q, %q) error = %v, want nil", tt.from, tt.trigger, err)
			}
			next, _ := sm.Next(tt.from, tt.trigger)
			if c.Transition != next {
				t.Errorf("Fire(...).Transition = %+v, want the table row %+v", c.Transition, next)
			}
			if c.Message != tt.wantMessage {
				t.Errorf("Fire(...).Message = %q, want %q", c.Message, tt.wantMessage)
			}
			if !c.At.Equal(at) {
				t.Errorf("Fire(...).At = %v, want the firing instant %v", c.At, at)
			}
			checkTime(t, "GoodbyeSentAt", c.GoodbyeSentAt, tt.sentAt)
			checkTime(t, "GoodbyeExpiresAt", c.GoodbyeExpiresAt, tt.expiresAt)
			checkTime(t, "RemindAt", c.RemindAt, tt.remindAt)
		})
	}
}

func TestFirePointersAreIndependent(t *testing.T) {
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c, err := sm.Fire(sm.Active, sm.Inactivity14d, at)
	if err != nil {
		t.Fatal(err)
	}
	*c.GoodbyeSentAt = c.GoodbyeSentAt.Add(time.Hour)
	if !c.At.Equal(at) {
		t.Errorf("changing *GoodbyeSentAt changed At to %v; the pointer must not alias At", c.At)
	}
	if c.GoodbyeSentAt == c.GoodbyeExpiresAt {
		t.Error("GoodbyeSentAt and GoodbyeExpiresAt point to the same time.Time")
	}
}

func checkTime(t *testing.T, field string, got, want *time.Time) {
	t.Helper()
	switch {
	case want == nil && got != nil:
		t.Errorf("%s = %v, want nil: this transition must not set it", field, *got)
	case want != nil && got == nil:
		t.Errorf("%s = nil, want %v", field, *want)
	case want != nil && !got.Equal(*want):
		t.Errorf("%s = %v, want exactly %v (off by %v)", field, *got, *want, got.Sub(*want))
	}
}

// TestDeadlineArgsCoverEveryTimer: each timer's from-states are in
// DeadlineArgs, under its own deadline function's parameters or, once per
// from-state, in the generic timer arrays, which line up.
func TestDeadlineArgsCoverEveryTimer(t *testing.T) {
	args := sm.DeadlineArgs()
	states, triggers, clocks, waits := args.TimerStates, args.TimerTriggers, args.TimerClocks, args.TimerWaits
	if len(triggers) != len(states) || len(clocks) != len(states) || len(waits) != len(states) {
		t.Fatalf("timer arrays of lengths %d, %d, %d, %d; want one length", len(states), len(triggers), len(clocks), len(waits))
	}
	for _, tm := range sm.Timers() {
		for _, f := range tm.FromStates() {
			switch tm.Trigger {
			case sm.Inactivity14d:
				if !slices.Contains(args.InactivityStates, string(f)) {
					t.Errorf("inactivity_states lacks %s", f)
				}
			case sm.GoodbyeTimeout:
				if !slices.Contains(args.GoodbyeStates, string(f)) {
					t.Errorf("goodbye_states lacks %s", f)
				}
			default:
				found := false
				for i := range states {
					if states[i] == string(f) && triggers[i] == string(tm.Trigger) {
						found = found || (clocks[i] == string(tm.Clock) && waits[i] == tm.Wait)
					}
				}
				if tm.Trigger.OwnDeadline() || !found {
					t.Errorf("timer %s from %s: not in the generic timer arrays with its clock %s and wait %s", tm.Trigger, f, tm.Clock, tm.Wait)
				}
			}
		}
	}
}
