package statemachine

import (
	"fmt"
	"slices"
	"time"
)

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
	// not answer.
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
