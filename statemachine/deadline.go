package statemachine

import "time"

// DeadlineArgs are the parameters every caller of the database's deadline
// functions passes them, taken from the transition table: the daily job's
// statements and verify's no_user_stuck, so that both decide by one
// definition whether a user's deadline has come. The keys are the
// statements' parameter names:
//
//   - inactivity, inactivity_states: inactivity_14d's wait and the states
//     it runs in (engagement_inactivity_due);
//   - goodbye_window, goodbye_states: goodbye_timeout's
//     (engagement_goodbye_due);
//   - timer_states, timer_triggers, timer_clocks, timer_waits: every
//     other timer, due at its clock (engagement_clock) plus its wait, one
//     entry per from-state.
//
// The map is a fresh one each call.
func DeadlineArgs() map[string]any {
	var (
		states             = map[Trigger][]string{}
		tStates, tTriggers []string
		tClocks            []string
		tWaits             []time.Duration
	)
	for _, t := range Timers() {
		for _, f := range t.FromStates() {
			states[t.Trigger] = append(states[t.Trigger], string(f))
			if !t.Trigger.OwnDeadline() {
				tStates, tTriggers = append(tStates, string(f)), append(tTriggers, string(t.Trigger))
				tClocks, tWaits = append(tClocks, string(t.Clock)), append(tWaits, t.Wait)
			}
		}
	}
	return map[string]any{
		"inactivity":        Inactivity14d.Wait(),
		"goodbye_window":    GoodbyeTimeout.Wait(),
		"inactivity_states": states[Inactivity14d],
		"goodbye_states":    states[GoodbyeTimeout],
		"timer_states":      tStates,
		"timer_triggers":    tTriggers,
		"timer_clocks":      tClocks,
		"timer_waits":       tWaits,
	}
}

// OwnDeadline reports whether timer t has a deadline function of its own in
// the database (migration 29: engagement_inactivity_due,
// engagement_goodbye_due); every other timer is due at engagement_clock
// plus its wait.
func (t Trigger) OwnDeadline() bool { return t == Inactivity14d || t == GoodbyeTimeout }
