package delivery

import (
	"time"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// The reach-out window (issue 58). An unofficial WhatsApp client such as
// Baileys sends as an ordinary account, and WhatsApp refuses that
// account's message to a contact who carries no valid trusted-contact
// token: error 463, "NackCallerReachoutTimelocked"
// (https://github.com/WhiskeySockets/Baileys/issues/2441: neither retries
// nor a fresh token lift it; #2688: contacts who had written before get it
// too). Baileys, as WhatsApp Web does, holds a token valid for a rolling 28
// days (7-day buckets) after the contact last wrote
// (https://github.com/WhiskeySockets/Baileys/pull/2339, merged). Goodbyes
// are queued at 14 days of silence, but a backlog under the send budget,
// quiet hours, a requeue, a hand-made enqueue or a reminder can reach day 28
// and beyond: such a message is not sent and is not worth a refusal on the
// account's record. On a transport.ReachoutLimited transport the
// send-time checks (claim.sql, recheck.sql) cancel it, reason
// reachout_window, whoever queued it and whatever its type. The window is
// measured from user_engagement_states.last_activity_at, the user's last
// message to the bot (engagement_fire(..., 'user_message')); a user with no
// state row has no message known, and is outside it. A last message only
// moves forward, so waiting never brings a message back inside.

// DefaultReachoutWindow is the reach-out window: 28 days, the life of a
// trusted-contact token in Baileys and WhatsApp Web (PR #2339 above).
const DefaultReachoutWindow = 28 * 24 * time.Hour

// reachoutWindow is claim.sql's and recheck.sql's @reachout_window: the
// window on a transport held to it, unless turned off; nil otherwise.
func (r *run) reachoutWindow() *time.Duration {
	if _, ok := r.cfg.Transport.(transport.ReachoutLimited); !ok || r.cfg.ReachoutWindow < 0 {
		return nil
	}
	return &r.cfg.ReachoutWindow
}
