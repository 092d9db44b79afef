// Package statemachine is the engagement state machine of the WhatsApp bot.
//
// Every user is in exactly one [State]. A [Trigger] — fired either by a
// scheduler job (inactivity, goodbye timeout, due reminder) or by the bot
// (the user wrote, or answered the goodbye message) — moves the user along
// one row of the transition table, which [Transitions] lists and [Next]
// looks up. [Fire] applies a trigger at an instant and reports the
// timestamps the transition sets on the user's row.
//
// The table is:
//
//	active        -inactivity_14d->              goodbye_sent (queues the goodbye message)
//	help_flow     -inactivity_14d->              goodbye_sent (queues the goodbye message)
//	goodbye_sent  -goodbye_timeout->             dormant (48 h after the goodbye was delivered)
//	goodbye_sent  -goodbye_undelivered->         active (the goodbye failed for good or was cancelled)
//	goodbye_sent  -goodbye_answer_help->         help_flow
//	goodbye_sent  -goodbye_answer_remind_later-> remind_later (remind_at = now + 14 days)
//	goodbye_sent  -goodbye_answer_dormant->      dormant
//	remind_later  -reminder_due->                dormant (engagement-daily --send-reminder also queues a reminder)
//	any state     -user_message->                active
//
// No state is a dead end: a help_flow user who goes silent falls back into
// the inactivity path, a goodbye the user never got does not time them out
// (they are active again, and a later goodbye is their first), and an
// opted-out user's timers (goodbye_timeout, reminder_due) complete
// silently: opted-out users are never messaged, and never left waiting.
//
// Any other (state, trigger) pair is invalid and yields an error wrapping
// [ErrInvalidTransition]. The package never panics and depends on the
// standard library only.
//
// The scheduler's jobs apply the scheduler triggers set-based in SQL and
// use the table ([Transitions], [Next]) to check the log. The rest is the
// bot's API (the bot is a Go program that imports this package): [Fire]
// computes what a trigger does to a state; the bot makes its moves in the
// database with activity.Fire (the SQL function engagement_fire, which
// applies this table), and reads stored states and triggers back with
// [ParseState], [ParseTrigger] and [Triggers].
package statemachine

import "time"

// Durations of the engagement contract.
const (
	// InactivityPeriod is how long an active user may stay silent: users
	// whose last_activity_at is before now minus this get a goodbye.
	InactivityPeriod = 14 * 24 * time.Hour
	// GoodbyeWindow is how long a goodbye may stay unanswered before it
	// times out, counted from when it was delivered.
	GoodbyeWindow = 48 * time.Hour
	// RemindLaterPeriod is how far ahead "remind me later" sets remind_at.
	RemindLaterPeriod = 14 * 24 * time.Hour
	// WeeklyWindow is the span the weekly review looks at: (now - WeeklyWindow, now].
	WeeklyWindow = 7 * 24 * time.Hour
)
