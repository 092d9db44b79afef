package delivery

import (
	"fmt"
	"time"
)

// Meta's messaging limit, counted as Meta counts it (issue 57).
//
// Meta, "Messaging limits"
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/messaging-limits):
// the limit is "the maximum number of unique WhatsApp user phone numbers
// your business can deliver messages to, outside of a customer service
// window, within a moving 24-hour period", "calculated and set at the
// business portfolio level and ... shared by all business phone numbers
// within a portfolio" (since 2025-10-07:
// https://developers.facebook.com/documentation/business-messaging/whatsapp/upcoming-messaging-limits-changes).
//
// So under --daily-limit auto:
//
//   - The send budget is the portfolio's: its row is keyed
//     "whatsapp-portfolio:<id>" (--whatsapp-business-portfolio-id), shared
//     by the processes of every number of the portfolio, whichever number
//     they send from. Without the setting it is the Cloud API
//     transport's row, "whatsapp", shared by every Cloud API process of
//     the database: one database usually serves one portfolio. The Phone
//     Number node Meta documents names no portfolio, so the operator says
//     which it is.
//   - A recipient whose customer service window is open (their last
//     message less than 24 hours before: engagement_service_window_open,
//     migration 73; Meta, "Customer service windows",
//     https://developers.facebook.com/documentation/business-messaging/whatsapp/messages/send-messages#customer-service-windows)
//     at the claim and still ServiceWindowMargin later spends no slot
//     (claim.sql's @window_margin). The margin covers the time from the
//     claim to the request, so that a window that closes meanwhile is
//     counted: the budget errs on the side of sending less.
//
// A limit the operator sets by hand (--daily-limit N, and any transport
// but the Cloud API: a Baileys number) is a safety cap, not Meta's: every
// recipient spends a slot, inside a window or not, in the transport's row.
//
// What the budget cannot know: messages the bot sends itself, outside the
// scheduler, to users outside their window count against the same Meta
// limit but not against this budget.

// ServiceWindowMargin is how long after the claim a recipient's customer
// service window must still be open for their message to spend no slot of
// --daily-limit auto's budget.
const ServiceWindowMargin = time.Hour

// portfolioBudgetPrefix starts the send budget's key of a business
// portfolio.
const portfolioBudgetPrefix = "whatsapp-portfolio:"

// budgetKey is the key of the send budget the processor spends: the
// portfolio's under --daily-limit auto with a portfolio id, else the
// transport's name.
func (r *run) budgetKey() string {
	if r.cfg.DailyLimitAuto && r.cfg.BusinessPortfolioID != "" {
		return portfolioBudgetPrefix + r.cfg.BusinessPortfolioID
	}
	return r.cfg.Transport.Name()
}

// windowMargin is claim.sql's @window_margin: ServiceWindowMargin under
// --daily-limit auto (recipients inside a window are free), else nil
// (every recipient spends a slot).
func (r *run) windowMargin() *time.Duration {
	if !r.cfg.DailyLimitAuto {
		return nil
	}
	margin := ServiceWindowMargin
	return &margin
}

// ValidPortfolioID checks a business portfolio id as Meta writes one: a
// string of up to 32 digits.
func ValidPortfolioID(id string) error {
	if id == "" || len(id) > 32 {
		return fmt.Errorf("a business portfolio id is 1 to 32 digits, got %d characters", len(id))
	}
	for _, r := range id {
		if r < '0' || r > '9' {
			return fmt.Errorf("a business portfolio id is digits only (Meta's id of the portfolio, as in Business Settings)")
		}
	}
	return nil
}
