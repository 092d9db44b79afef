package statemachine

import "time"

// What follows a goodbye that failed for good (issue 55): the user goes
// back to active (GoodbyeUndelivered), and their next goodbye waits by the
// failure's WhatsApp error code and how many goodbyes in a row failed since
// the user last wrote. The daily job's goodbye_timeout step records the
// count and the instant on the user's row (goodbye_failures,
// goodbye_retry_at: migration 67), counted from the failed goodbye's
// goodbye_sent_at; inactivity_14d and verify's no_user_stuck wait for it,
// unless the user wrote since.

// Codes of WhatsApp's Cloud API that the backoff tells apart.
const (
	// CodeEcosystemLimit is 131049, "This message was not delivered to
	// maintain healthy ecosystem engagement": Meta's per-user limit on
	// marketing templates, from any business. The limit passes; Meta's
	// guidance is not to send again at once but at growing intervals.
	CodeEcosystemLimit = "131049"
	// CodeMarketingStopped is 131050: the user stopped marketing messages
	// from this business. The receipt and queue-process opt the user out;
	// no backoff is needed, and the goodbye never times them out.
	CodeMarketingStopped = "131050"
)

// EcosystemLimitBackoff is the wait between goodbyes after the 1st, 2nd, …
// consecutive failure whose code is 131049: 2, 4, 8 and 16 days (the
// daily job runs once a day, and a goodbye is never sent twice the same
// UTC day, so a day would wait two anyway). Past the last, no goodbye
// until the user writes.
var EcosystemLimitBackoff = []time.Duration{2 * day, 4 * day, 8 * day, 16 * day}

// UndeliverableBackoff is the wait between goodbyes after the 1st, 2nd, …
// consecutive failure of any other code (131026 "message undeliverable",
// a code the scheduler does not know, a failure without a code): 7, 14 and
// 28 days. Past the last, no goodbye until the user writes: a number that
// could not take three goodbyes in seven weeks is left alone.
var UndeliverableBackoff = []time.Duration{7 * day, 14 * day, 28 * day}

const day = 24 * time.Hour

// UntilTheUserWrites are the cancel reasons after which a goodbye is not
// tried again until the user writes: the same goodbye would be cancelled
// the same way every day until then. reachout_window: the user's last
// message is older than the webhook's reach-out window, and only a new
// one opens it again; us_marketing_blocked: Meta delivers no marketing
// template to a +1 number, whatever the day.
func UntilTheUserWrites() []string {
	return []string{CancelReachoutWindow, CancelUSMarketingBlocked}
}

// Backoff is the goodbye backoff as the daily job's goodbye_timeout
// statement takes it.
type Backoff struct {
	EcosystemLimitCode   string
	MarketingStoppedCode string
	EcosystemLimit       []time.Duration
	Undeliverable        []time.Duration
	// UntilTheUserWrites are UntilTheUserWrites' reasons.
	UntilTheUserWrites []string
}

// BackoffArgs is the goodbye backoff, in fresh slices each call.
func BackoffArgs() Backoff {
	return Backoff{
		EcosystemLimitCode: CodeEcosystemLimit, MarketingStoppedCode: CodeMarketingStopped,
		EcosystemLimit:     append([]time.Duration(nil), EcosystemLimitBackoff...),
		Undeliverable:      append([]time.Duration(nil), UndeliverableBackoff...),
		UntilTheUserWrites: UntilTheUserWrites(),
	}
}
