package statemachine

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Message names a kind of message: the queue's message_type column.
type Message string

// The kinds of message the jobs queue (see Kinds for what each one is).
const (
	// NoMessage means a transition queues no message.
	NoMessage Message = ""
	// GoodbyeMessage is the goodbye sent to a user who went inactive.
	GoodbyeMessage Message = "goodbye"
	// WeeklyReviewMessage is the weekly review engagement-weekly queues.
	WeeklyReviewMessage Message = "weekly_review"
	// ReminderMessage is the reminder engagement-daily --send-reminder
	// queues when a "remind me later" comes due.
	ReminderMessage Message = "reminder"
	// OptOutConfirmationMessage tells a user who just opted out that they
	// will get no more such messages: queued by engagement_opt_out only when
	// its caller asks (off by default; docs/consent.md).
	OptOutConfirmationMessage Message = "opt_out_confirmation"
)

// Kind is everything the project knows about one kind of message, declared
// once in the kinds table below: the jobs queue it from here, queue-process
// checks it at send time from here, verify checks it and the reference
// documents it from here. A new kind is a row here, its texts in the
// catalog, and the statement of the step that queues it
// (docs/development.md, "Adding a message kind").
type Kind struct {
	// Message is the kind's name, the queue's message_type.
	Message Message
	// CatalogKey is the text the message is rendered from at send time (the
	// message_key column). Every catalog must have it, in its default
	// locale at least (sender's catalog test checks the shipped one).
	CatalogKey string
	// Trigger is the daily job's trigger whose transition queues it; empty
	// for a kind a job queues without moving its user (the weekly review).
	Trigger Trigger
	// OnRequest marks a kind its trigger queues only when the job is told to
	// (engagement-daily --send-reminder); the transition table does not
	// list it as the transition's message.
	OnRequest bool
	// KeyInfix and Period make the idempotency key:
	// {userId}{KeyInfix}{the period's label}, e.g.
	// "…:goodbye_sent:2026-11-24". A user gets at most one message of the
	// kind per period, whoever queues it.
	KeyInfix string
	Period   Period
	// SendWhile lists the states its user must still be in when it is sent;
	// queue-process cancels it as stale in any other.
	SendWhile []State
	// CurrentGoodbyeOnly makes it stale too unless its period is the UTC day
	// of the user's goodbye_sent_at: the goodbye of an earlier silence is
	// not the one the user is waiting on.
	CurrentGoodbyeOnly bool
	// Check names verify's check that no user has two of the kind for one
	// period, and Plural is the kind's plural in its examples; empty for a
	// kind verify does not count (a reminder's period is its own instant).
	Check, Plural string
	// ConfirmsOptOut marks the kind that answers a user's opt-out: sent only
	// while its user is still opted out (every other kind: only while they
	// are not), in any state, and not held by the quiet hours, since it
	// answers the user's own message of a moment ago. No job queues it:
	// engagement_opt_out does, when asked (migration 54).
	ConfirmsOptOut bool
	// Category is the kind's pricing category in Meta's terms (Category*):
	// what a template of the kind is billed as, per delivered message,
	// when Meta's own status webhook has not said (package pricing). A
	// marketing kind is never sent to a user who opted out or was erased,
	// whoever queued it (docs/consent.md, "Every door"). A message type
	// that is no kind is marketing unless the operator declares otherwise
	// (engagementctl categories).
	Category Category
	// Holdout marks the kind the goodbye's holdout withholds: never sent
	// to a user held out of the current cycle, whoever queued it
	// (docs/holdout.md).
	Holdout bool
}

// Category is a Meta pricing category: what WhatsApp's Cloud API bills a
// template message as (https://developers.facebook.com/docs/whatsapp/pricing).
type Category string

// Meta's pricing categories.
const (
	// CategoryMarketing is any template that is not a utility or an
	// authentication one: promotions, and re-engagement. The dearest.
	CategoryMarketing Category = "marketing"
	// CategoryUtility is a template about a transaction the user asked
	// for (an order's update, an account alert).
	CategoryUtility Category = "utility"
	// CategoryAuthentication is a one-time passcode template.
	CategoryAuthentication Category = "authentication"
	// CategoryService is a free-form reply inside the 24 hours the user's
	// own message opens: free.
	CategoryService Category = "service"
)

// Categories returns Meta's pricing categories in a fixed order:
// marketing, utility, authentication, service.
func Categories() []Category {
	return []Category{CategoryMarketing, CategoryUtility, CategoryAuthentication, CategoryService}
}

// Valid reports whether c is one of Meta's pricing categories.
func (c Category) Valid() bool { return slices.Contains(Categories(), c) }

// kinds is the table of message kinds, in the order Kinds reports them.
var kinds = []Kind{
	{
		Message:            GoodbyeMessage,
		CatalogKey:         "engagement.goodbye.self_select",
		Trigger:            Inactivity14d,
		KeyInfix:           ":goodbye_sent:",
		Period:             PerDay,
		SendWhile:          []State{GoodbyeSent},
		CurrentGoodbyeOnly: true,
		Check:              "one_goodbye_per_day",
		Plural:             "goodbyes",
		Holdout:            true,
		// Asking a user who went quiet to come back is re-engagement:
		// Meta's marketing, whatever the template's wording.
		Category: CategoryMarketing,
	},
	{
		Message:    WeeklyReviewMessage,
		CatalogKey: "engagement.weekly_review.celebration",
		KeyInfix:   ":weekly_review:",
		Period:     PerISOWeek,
		SendWhile:  []State{Active, HelpFlow},
		Check:      "one_review_per_week",
		Plural:     "reviews",
		// A celebration of the user's week, unasked for: not about a
		// transaction the user asked for, so not utility by Meta's
		// guidelines (Meta re-categorises a "utility" template with
		// promotional or engagement content as marketing anyway).
		// Marketing is the safe estimate; Meta's webhook says what it
		// actually billed.
		Category: CategoryMarketing,
	},
	{
		Message:    ReminderMessage,
		CatalogKey: "engagement.reminder.come_back",
		Trigger:    ReminderDue,
		OnRequest:  true,
		KeyInfix:   ":reminder:",
		Period:     PerInstant,
		SendWhile:  []State{RemindLater, Dormant},
		// The "remind me later" the user asked for, but its content asks
		// them to come back: re-engagement, marketing.
		Category: CategoryMarketing,
	},
	{
		Message:        OptOutConfirmationMessage,
		CatalogKey:     "engagement.opt_out.confirmation",
		KeyInfix:       ":opt_out_confirmation:",
		Period:         PerInstant,
		SendWhile:      States(),
		ConfirmsOptOut: true,
		// The answer to the user's own request, inside the customer
		// service window their message opened: a utility template on the
		// Cloud API, which Meta does not bill inside an open window.
		Category: CategoryUtility,
	},
}

// Kinds returns the message kinds in a fixed order: goodbye, weekly_review,
// reminder, opt_out_confirmation. The slice and its rows are copies.
func Kinds() []Kind { return Default.Kinds() }

// KindOf returns the kind named m, and false if there is none.
func KindOf(m Message) (Kind, bool) { return Default.KindOf(m) }

// KindFiredBy returns the kind trigger t queues, on request or not, and
// false if it queues none.
func KindFiredBy(t Trigger) (Kind, bool) { return Default.KindFiredBy(t) }

// KeySuffix is what follows the user id in the idempotency key of the
// message covering at: the jobs build keys set-based in SQL as
// user_id::text || KeySuffix(asOf).
func (k Kind) KeySuffix(at time.Time) string { return k.KeyInfix + k.Period.Label(at) }

// Key is the idempotency key of userID's message covering at.
func (k Kind) Key(userID string, at time.Time) string { return userID + k.KeySuffix(at) }

// Period is what one message of a kind stands for.
type Period string

// The periods.
const (
	// PerDay is the UTC day, labelled YYYY-MM-DD.
	PerDay Period = "day"
	// PerISOWeek is the UTC ISO week, Monday to Monday, labelled YYYY-Www.
	PerISOWeek Period = "week"
	// PerInstant is one instant, labelled in Unix milliseconds: the user's
	// own timer (a reminder's remind_at), not the run's.
	PerInstant Period = "instant"
)

// Bounds is the period holding t, [start, end). end is also the last
// instant a run could produce the period's key again (the queue's
// replay_until). An instant is its own start and end.
func (p Period) Bounds(t time.Time) (start, end time.Time) {
	y, m, d := t.UTC().Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	switch p {
	case PerDay:
		return day, day.AddDate(0, 0, 1)
	case PerISOWeek:
		start = day.AddDate(0, 0, -(int(day.Weekday())+6)%7)
		return start, start.AddDate(0, 0, 7)
	}
	return t, t
}

// Label is the period holding t as keys name it: "2026-11-24",
// "2026-W48" (ISO 8601: 2027-01-01 is in 2026-W53), "1795500000000".
func (p Period) Label(t time.Time) string {
	switch p {
	case PerDay:
		return t.UTC().Format(time.DateOnly)
	case PerISOWeek:
		year, week := t.UTC().ISOWeek()
		return fmt.Sprintf("%04d-W%02d", year, week)
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}
