package statemachine

import (
	"fmt"
	"slices"
	"time"
)

// This file is the state machine's table: its triggers and its
// transitions, with each timer's clock and wait. Adding a trigger is a
// constant, its place in triggers and its rows in transitions; the kind of
// message it queues, if any, is a row of kinds (kind.go).

// Trigger is an event that may move a user from one state to another. Its
// string form is a public contract, stored in the trigger column.
type Trigger string

// Triggers driven by the scheduler jobs.
const (
	// Inactivity14d fires when an active user has been silent for
	// InactivityPeriod; it moves active to goodbye_sent and queues the
	// goodbye message.
	Inactivity14d Trigger = "inactivity_14d"
	// GoodbyeTimeout fires when a goodbye stayed unanswered for
	// GoodbyeWindow after it was delivered; it moves goodbye_sent to
	// dormant.
	GoodbyeTimeout Trigger = "goodbye_timeout"
	// GoodbyeUndelivered fires when the goodbye failed for good or was
	// cancelled before the user got it; it moves goodbye_sent back to
	// active, so that the user is never timed out on a goodbye they could
	// not answer. Their next goodbye (Inactivity14d) comes on a later UTC
	// day: one goodbye a day, so a re-run the same day changes nothing. It
	// is not a timer of its own: goodbye_timeout's step fires it, on the
	// goodbye's fate.
	GoodbyeUndelivered Trigger = "goodbye_undelivered"
	// ReminderDue fires when remind_at is due; it moves remind_later to
	// dormant, queueing the reminder when the daily job is told to.
	ReminderDue Trigger = "reminder_due"
)

// Triggers driven by the bot.
const (
	// UserMessage fires when the user writes; it moves any state to active
	// (from active it is a valid self-transition).
	UserMessage Trigger = "user_message"
	// GoodbyeAnswerHelp fires when the user answers the goodbye asking for
	// help; it moves goodbye_sent to help_flow.
	GoodbyeAnswerHelp Trigger = "goodbye_answer_help"
	// GoodbyeAnswerRemindLater fires when the user answers the goodbye
	// asking to be reminded later; it moves goodbye_sent to remind_later
	// and sets remind_at to now + RemindLaterPeriod.
	GoodbyeAnswerRemindLater Trigger = "goodbye_answer_remind_later"
	// GoodbyeAnswerDormant fires when the user answers the goodbye asking
	// to be left alone; it moves goodbye_sent to dormant.
	GoodbyeAnswerDormant Trigger = "goodbye_answer_dormant"
)

// Triggers returns all triggers in a fixed order: the scheduler triggers
// first, then the bot triggers. The slice is a fresh copy.
func Triggers() []Trigger { return Default.Triggers() }

// triggers lists every trigger once, in the order Triggers reports them.
var triggers = []Trigger{
	Inactivity14d, GoodbyeTimeout, GoodbyeUndelivered, ReminderDue,
	UserMessage, GoodbyeAnswerHelp, GoodbyeAnswerRemindLater, GoodbyeAnswerDormant,
}

// Wait is the wait of timer t (see Transition.Wait): 0 for a trigger that
// is not a timer, and for a timer due at its clock (reminder_due).
func (t Trigger) Wait() time.Duration { return Default.Wait(t) }

// Clock is what a timer's wait counts from: a time the user's rows keep,
// always business time (the as-of of the run or the instant of the bot's
// move that set it, never the clock of the write). Its string form is the
// clock's name in SQL (engagement_clock's first argument, migration 42)
// and in the reference.
type Clock string

// The clocks.
const (
	// NoClock is the clock of a trigger that is not a timer: the bot's,
	// and goodbye_undelivered, which goodbye_timeout's step fires.
	NoClock Clock = ""
	// LastActivity is the user's last activity: last_activity_at, or the
	// state row's created_at when the bot recorded none.
	LastActivity Clock = "last_activity"
	// GoodbyeDelivered is the delivery of the user's goodbye: its sent_at,
	// the last attempt of one in doubt, goodbye_expires_at without one.
	// Only goodbye_timeout's own statement reads it (it is in the queue,
	// not on the user's row).
	GoodbyeDelivered Clock = "goodbye_delivered"
	// RemindAt is the user's remind_at, set by "remind me later".
	RemindAt Clock = "remind_at"
	// StateEntered is when the user entered their current state:
	// state_entered_at (migration 42), set by every move, the jobs' and
	// the bot's, to the move's business time.
	StateEntered Clock = "state_entered"
)

// OnUserRow reports whether c is a time on the user's engagement row, so
// that a timer counting from it needs no statement of its own (the daily
// job's generic step, daily_timer.sql, moves its users).
func (c Clock) OnUserRow() bool {
	return c == LastActivity || c == RemindAt || c == StateEntered
}

// ParseTrigger returns the Trigger named by s, or an error wrapping
// ErrUnknownTrigger that names s if it is not a known trigger.
func ParseTrigger(s string) (Trigger, error) {
	if t := Trigger(s); t.Valid() {
		return t, nil
	}
	return "", fmt.Errorf("%w %q", ErrUnknownTrigger, s)
}

// ByBot reports whether t is one of the bot's moves (engagement_fire's):
// user_message and the answers to the goodbye. Every other trigger is the
// scheduler's.
func (t Trigger) ByBot() bool {
	switch t {
	case UserMessage, GoodbyeAnswerHelp, GoodbyeAnswerRemindLater, GoodbyeAnswerDormant:
		return true
	}
	return false
}

// Valid reports whether t is one of the known triggers.
func (t Trigger) Valid() bool { return slices.Contains(triggers, t) }

// String returns the stored form of t, e.g. "inactivity_14d".
func (t Trigger) String() string { return string(t) }

// Transition is one row of the transition table.
type Transition struct {
	// From is the state the transition leaves.
	From State
	// Trigger is the event that fires the transition.
	Trigger Trigger
	// To is the state the transition enters.
	To State
	// Message is the message queued with the transition, if any: the kind
	// whose Trigger is the transition's (see Kinds), unless the kind is
	// queued only on request. Only Inactivity14d queues one, the goodbye.
	Message Message
	// Clock and Wait make the transition a timer, one the scheduler
	// fires: engagement-daily moves a user in From once Wait has passed
	// since Clock (as-of ≥ clock + wait), and engagementctl verify's
	// no_user_stuck reports a user still there a day later. NoClock for the
	// bot's moves. Every row of one trigger has the same clock and wait.
	Clock Clock
	Wait  time.Duration
}

// transitions is the transition table, in the order Transitions reports it.
// Each row's Message comes from the kinds table (see Default).
var transitions = []Transition{
	{From: Active, Trigger: Inactivity14d, To: GoodbyeSent, Clock: LastActivity, Wait: InactivityPeriod},
	{From: Active, Trigger: UserMessage, To: Active},

	{From: GoodbyeSent, Trigger: GoodbyeTimeout, To: Dormant, Clock: GoodbyeDelivered, Wait: GoodbyeWindow},
	{From: GoodbyeSent, Trigger: GoodbyeUndelivered, To: Active},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerHelp, To: HelpFlow},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerRemindLater, To: RemindLater},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerDormant, To: Dormant},
	{From: GoodbyeSent, Trigger: UserMessage, To: Active},

	{From: HelpFlow, Trigger: Inactivity14d, To: GoodbyeSent, Clock: LastActivity, Wait: InactivityPeriod},
	{From: HelpFlow, Trigger: UserMessage, To: Active},

	{From: RemindLater, Trigger: ReminderDue, To: Dormant, Clock: RemindAt},
	{From: RemindLater, Trigger: UserMessage, To: Active},

	{From: Dormant, Trigger: UserMessage, To: Active},
}

// edge is the key of the transition index.
type edge struct {
	from    State
	trigger Trigger
}

// Transitions returns the full transition table in a deterministic order.
// The slice is a copy: changing it does not change the table.
func Transitions() []Transition { return Default.Transitions() }

// Next returns the transition trigger t causes from state from, or a
// *TransitionError wrapping ErrInvalidTransition if there is none (including
// when from or t is not a known value).
func Next(from State, t Trigger) (Transition, error) { return Default.Next(from, t) }

// Timers returns the rows of the table that are timers (a Clock), one per
// trigger (its first row), in the order of Triggers: the daily job's steps,
// in the order it runs them.
func Timers() []Transition { return Default.Timers() }

// FromStates lists every state the table moves to t.To on t.Trigger, t.From
// first: one step of the daily job moves them all in one pass (help_flow
// users who went silent fall back into the inactivity path with active
// ones).
func (t Transition) FromStates() []State { return Default.FromStates(t) }

// When says in words when timer t fires, for help texts and the
// reference: "14 days after the last activity", "at remind_at". "" for a
// transition that is not a timer.
func (t Transition) When() string {
	since, ok := clockWords[t.Clock]
	switch {
	case !ok:
		return ""
	case t.Wait == 0:
		return "at " + since
	}
	return FormatWait(t.Wait) + " after " + since
}

// clockWords name the clocks in When.
var clockWords = map[Clock]string{
	LastActivity:     "the last activity",
	GoodbyeDelivered: "the goodbye's delivery",
	RemindAt:         "remind_at",
	StateEntered:     "entering the state",
}

// FormatWait spells a wait as the docs do: whole days as days ("14
// days"), anything else in hours ("48 h").
func FormatWait(w time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case w == day:
		return "1 day"
	case w%day == 0 && w >= 7*day:
		return fmt.Sprintf("%d days", w/day)
	}
	return fmt.Sprintf("%g h", w.Hours())
}
