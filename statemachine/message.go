package statemachine

// The vocabulary of the message queue and of the jobs' summaries, declared
// here once: every Go package names these constants, every statement and
// CHECK constraint spells the same words, and
// TestSQLUsesOnlyDeclaredValues and TestCheckConstraintsMatchTheDeclaredValues
// (internal/drift/vocabulary_test.go) hold the SQL to them.

// A message's status (engagement_message_queue.status).
const (
	StatusPending    = "pending"    // waiting for queue-process (or held: quiet hours, the send budget)
	StatusProcessing = "processing" // claimed by a queue-process, under its lease
	StatusSent       = "sent"       // accepted by the transport
	StatusFailed     = "failed"     // failed for good
	StatusCancelled  = "cancelled"  // not sent, and never will be: see its cancel reason
)

// MessageStatuses returns every message status in the order reports list
// them: pending, processing, sent, failed, cancelled. The slice is a fresh
// copy.
func MessageStatuses() []string {
	return []string{StatusPending, StatusProcessing, StatusSent, StatusFailed, StatusCancelled}
}

// Why a message was cancelled instead of sent
// (engagement_message_queue.cancel_reason).
const (
	CancelOptedOut  = "opted_out" // a marketing message to a user who opted out
	CancelStale     = "stale"     // the user's state no longer calls for it
	CancelNoUser    = "no_user"   // the user's rows are gone
	CancelOperator  = "operator"  // engagementctl cancel, or the console's Cancel
	CancelFrequency = "frequency" // over the per-user cap, it would have waited past its period
	CancelErased    = "erased"    // the user was erased (engagementctl erase, the console)
	CancelHoldout   = "holdout"   // a goodbye to a user held out of the current cycle
	// CancelUSMarketingBlocked: a marketing template to a +1 (US) number on
	// the Cloud API, which Meta does not deliver (since 2025-04-01).
	CancelUSMarketingBlocked = "us_marketing_blocked"
	// CancelReachoutWindow: on the webhook transport (an unofficial
	// WhatsApp client such as Baileys), a message to a user whose last
	// message to the bot is older than queue-process --reachout-window:
	// WhatsApp refuses it (error 463, the reach-out timelock).
	CancelReachoutWindow = "reachout_window"
)

// CancelReasons returns every cancel reason, in the order reports show them:
// opted_out, stale, no_user, operator, frequency, erased, holdout,
// us_marketing_blocked, reachout_window. The slice is a fresh copy.
func CancelReasons() []string {
	return []string{CancelOptedOut, CancelStale, CancelNoUser, CancelOperator, CancelFrequency, CancelErased, CancelHoldout,
		CancelUSMarketingBlocked, CancelReachoutWindow}
}

// Why a pending message waits past its scheduled time
// (engagement_message_queue.deferred_reason).
const (
	DeferredQuietHours     = "quiet_hours"     // the user's quiet hours: held until they end
	DeferredBudget         = "budget"          // the day's send budget is spent: waits for the next day's
	DeferredFrequency      = "frequency"       // its user got --per-user-cap messages in the cap's window
	DeferredQuality        = "quality"         // a marketing message while Meta rates the number red or flags it
	DeferredTemplatePaused = "template_paused" // Meta paused or disabled its template
)

// DeferredReasons returns every deferred reason: quiet_hours, budget,
// frequency, quality, template_paused. The slice is a fresh copy.
func DeferredReasons() []string {
	return []string{DeferredQuietHours, DeferredBudget, DeferredFrequency, DeferredQuality, DeferredTemplatePaused}
}

// Why a job left a user who qualified for a step alone: the keys of a
// job summary's skip_reasons.
const (
	SkipOptedOut      = "opted_out"      // reengagement_opt_out is set: never touched
	SkipNoDestination = "no_destination" // no JID to send the message to: left as is
	SkipStateChanged  = "state_changed"  // the bot (or another run) moved the user first
	SkipLocked        = "locked"         // the bot held the user's row locked; a later run handles it
)

// SkipReasons returns every skip reason: opted_out, no_destination,
// state_changed, locked. The slice is a fresh copy.
func SkipReasons() []string {
	return []string{SkipOptedOut, SkipNoDestination, SkipStateChanged, SkipLocked}
}
