package activity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLStateUnknownReceiptStatus is what engagement_receipt raises (migration
// 49) for a status other than the four a Receipt may carry; an instant out
// of range is SQLStateInstantOutOfRange, as for Fire.
const SQLStateUnknownReceiptStatus = "EN007"

// ErrUnknownReceiptStatus is returned by Receipt for a status that is not
// one of the Receipt* statuses.
var ErrUnknownReceiptStatus = errors.New("unknown receipt status")

// A receipt's status, as WhatsApp reports it: Meta's statuses[].status,
// or Baileys' acks (server ack: sent; delivery ack: delivered; read).
const (
	ReceiptSent      = "sent"      // WhatsApp's servers have it: nothing new to the queue
	ReceiptDelivered = "delivered" // on the user's phone
	ReceiptRead      = "read"      // read, which implies delivered
	ReceiptFailed    = "failed"    // not deliverable after all: a late failure
)

// What Receipt returns: what is known of the message after the receipt.
// A message the queue has not sent (pending, processing, cancelled) is
// reported by its status.
const (
	MessageAccepted  = "accepted"  // sent; no receipt of delivery yet
	MessageDelivered = "delivered" // delivered_at is set
	MessageRead      = "read"      // read_at is set
	MessageFailed    = "failed"    // failed, at the send or after acceptance
)

// ReceiptOptions are Receipt's optional arguments.
type ReceiptOptions struct {
	// At is when WhatsApp says it happened (Meta's timestamp); the
	// transaction's time when zero.
	At time.Time
	// ErrorCode is WhatsApp's error code of a failure (Meta's
	// errors[0].code, e.g. 131026), kept in the message's error_message.
	ErrorCode string
}

// Receipt applies one of WhatsApp's receipts to the message whose provider
// id (the Cloud API's wamid, or the message id the bot answered the
// webhook with) is providerMessageID: one statement, engagement_receipt,
// which needs only EXECUTE on it. Receipts may come again and in any
// order: a message never moves back (read implies delivered, and the
// earliest instant reported is kept), and a failure after acceptance
// makes the message failed, not delivered. It returns one of the Message*
// values, or ok false for an id that is none of the queue's (the bot's own
// conversation), which changes nothing. Errors: a status that is none of
// the Receipt* values ErrUnknownReceiptStatus, an instant out of range
// ErrInstantOutOfRange.
func Receipt(ctx context.Context, db Querier, providerMessageID, status string, o ReceiptOptions) (known string, ok bool, err error) {
	row, err := receiptQuery.One(ctx, db, receiptArgs{ProviderMessageID: providerMessageID, Status: status,
		At: instant(o.At), ErrorCode: optional(o.ErrorCode)})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case SQLStateUnknownReceiptStatus:
			return "", false, fmt.Errorf("engagement_receipt: %w %q", ErrUnknownReceiptStatus, status)
		case SQLStateInstantOutOfRange:
			return "", false, fmt.Errorf("engagement_receipt: %w: %s", ErrInstantOutOfRange, o.At.UTC().Format(time.RFC3339Nano))
		}
	}
	if err != nil {
		return "", false, fmt.Errorf("engagement_receipt: %w", err)
	}
	if row.Known == nil {
		return "", false, nil
	}
	return *row.Known, true, nil
}
