package statemachine

import "time"

// Deadlines are the parameters every caller of the database's deadline
// functions passes them, taken from the transition table: the daily job's
// statements and verify's no_user_stuck, so that both decide by one
// definition whether a user's deadline has come. Each field is named after
// the statements' parameter (@inactivity is Inactivity), so a statement's
// generated arguments take them field by field.
type Deadlines struct {
	// Inactivity and InactivityStates are inactivity_14d's wait and the
	// states it runs in (engagement_inactivity_due): @inactivity,
	// @inactivity_states.
	Inactivity       time.Duration
	InactivityStates []string
	// GoodbyeWindow and GoodbyeStates are goodbye_timeout's
	// (engagement_goodbye_due): @goodbye_window, @goodbye_states.
	GoodbyeWindow time.Duration
	GoodbyeStates []string
	// TimerStates, TimerTriggers, TimerClocks and TimerWaits are every
	// other timer, due at its clock (engagement_clock) plus its wait, one
	// entry per from-state, in parallel: @timer_states, @timer_triggers,
	// @timer_clocks, @timer_waits.
	TimerStates, TimerTriggers, TimerClocks []string
	TimerWaits                              []time.Duration
}

// DeadlineArgs are the deadlines of the transition table (see Deadlines),
// in fresh slices each call: Default's.
func DeadlineArgs() Deadlines { return Default.DeadlineArgs() }

// DeadlineArgs are the deadlines of m's transition table (see Deadlines),
// in fresh slices each call.
func (m Machine) DeadlineArgs() Deadlines {
	d := Deadlines{Inactivity: m.Wait(Inactivity14d), GoodbyeWindow: m.Wait(GoodbyeTimeout)}
	for _, t := range m.Timers() {
		for _, f := range m.FromStates(t) {
			switch {
			case t.Trigger == Inactivity14d:
				d.InactivityStates = append(d.InactivityStates, string(f))
			case t.Trigger == GoodbyeTimeout:
				d.GoodbyeStates = append(d.GoodbyeStates, string(f))
			case !t.Trigger.OwnDeadline():
				d.TimerStates, d.TimerTriggers = append(d.TimerStates, string(f)), append(d.TimerTriggers, string(t.Trigger))
				d.TimerClocks, d.TimerWaits = append(d.TimerClocks, string(t.Clock)), append(d.TimerWaits, t.Wait)
			}
		}
	}
	return d
}

// OwnDeadline reports whether timer t has a deadline function of its own in
// the database (migration 29: engagement_inactivity_due,
// engagement_goodbye_due); every other timer is due at engagement_clock
// plus its wait.
func (t Trigger) OwnDeadline() bool { return t == Inactivity14d || t == GoodbyeTimeout }
