package statemachine

import (
	"fmt"
	"slices"
	"time"
)

// This file is the state machine's table: its triggers, with the waits of
// the scheduler's, and its transitions. Adding a trigger is a constant, its
// place in triggers (and its wait) and its rows in transitions; the kind of
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
	// day: one goodbye a day, so a re-run the same day changes nothing.
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
func Triggers() []Trigger { return slices.Clone(triggers) }

// triggers lists every trigger once, in the order Triggers reports them.
var triggers = []Trigger{
	Inactivity14d, GoodbyeTimeout, GoodbyeUndelivered, ReminderDue,
	UserMessage, GoodbyeAnswerHelp, GoodbyeAnswerRemindLater, GoodbyeAnswerDormant,
}

// Wait is how long a user stays in the from-state of a transition on
// scheduler trigger t before it fires: engagement-daily fires it on users
// whose clock started before as-of − Wait. 0 for the bot's triggers and for
// a trigger with a due time of its own (reminder_due: remind_at).
//
// The rule each wait is part of is defined once, in SQL functions the
// daily job's statements and engagementctl verify's no_user_stuck both call
// with these waits (migration 29; scheduler.DeadlineArgs).
func (t Trigger) Wait() time.Duration { return waits[t] }

// waits are the scheduler triggers' waits (see Wait).
var waits = map[Trigger]time.Duration{
	Inactivity14d:  InactivityPeriod,
	GoodbyeTimeout: GoodbyeWindow,
}

// ParseTrigger returns the Trigger named by s, or an error wrapping
// ErrUnknownTrigger that names s if it is not a known trigger.
func ParseTrigger(s string) (Trigger, error) {
	if t := Trigger(s); t.Valid() {
		return t, nil
	}
	return "", fmt.Errorf("%w %q", ErrUnknownTrigger, s)
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
}

// transitions is the transition table, in the order Transitions reports it.
// Each row's Message comes from the kinds table (withMessages).
var transitions = withMessages([]Transition{
	{From: Active, Trigger: Inactivity14d, To: GoodbyeSent},
	{From: Active, Trigger: UserMessage, To: Active},

	{From: GoodbyeSent, Trigger: GoodbyeTimeout, To: Dormant},
	{From: GoodbyeSent, Trigger: GoodbyeUndelivered, To: Active},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerHelp, To: HelpFlow},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerRemindLater, To: RemindLater},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerDormant, To: Dormant},
	{From: GoodbyeSent, Trigger: UserMessage, To: Active},

	{From: HelpFlow, Trigger: Inactivity14d, To: GoodbyeSent},
	{From: HelpFlow, Trigger: UserMessage, To: Active},

	{From: RemindLater, Trigger: ReminderDue, To: Dormant},
	{From: RemindLater, Trigger: UserMessage, To: Active},

	{From: Dormant, Trigger: UserMessage, To: Active},
})

// withMessages fills each row's Message from the kinds table.
func withMessages(rows []Transition) []Transition {
	for i, r := range rows {
		if k, ok := KindFiredBy(r.Trigger); ok && !k.OnRequest {
			rows[i].Message = k.Message
		}
	}
	return rows
}

// edge is the key of the transition index.
type edge struct {
	from    State
	trigger Trigger
}

// index maps (From, Trigger) to its row of the transition table.
var index = buildIndex(transitions)

func buildIndex(rows []Transition) map[edge]Transition {
	m := make(map[edge]Transition, len(rows))
	for _, r := range rows {
		m[edge{r.From, r.Trigger}] = r
	}
	return m
}

// Transitions returns the full transition table in a deterministic order.
// The slice is a copy: changing it does not change the table.
func Transitions() []Transition {
	out := make([]Transition, len(transitions))
	copy(out, transitions)
	return out
}

// Next returns the transition trigger t causes from state from, or a
// *TransitionError wrapping ErrInvalidTransition if there is none (including
// when from or t is not a known value).
func Next(from State, t Trigger) (Transition, error) {
	tr, ok := index[edge{from, t}]
	if !ok {
		return Transition{}, &TransitionError{From: from, Trigger: t}
	}
	return tr, nil
}
