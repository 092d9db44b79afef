package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// LookupHeader marks a lookup: a probe (ProbeHeader, message_type
// "probe", no JID, no text) under a message's own Idempotency-Key, which
// asks the receiver whether it had that message, and sends nothing.
const LookupHeader = "X-Engagement-Lookup"

// Lookup is what a receiver says of a message whose request may have
// reached it before queue-process lost track (a process killed mid-batch).
type Lookup struct {
	// Had: the receiver had the message's key as sent; ProviderMessageID
	// is the id it sent it under, when it says.
	Had               bool
	ProviderMessageID string
}

// ErrLookupUnanswered is a lookup the receiver could not answer: it is
// sending the key now (425), the key was claimed and never finished (409),
// or any other answer. Whether the message went out is unknown.
var ErrLookupUnanswered = errors.New("the receiver could not say whether it had the message")

// A Looker can ask its receiver, without sending anything, whether a
// message reached it.
type Looker interface {
	Lookup(ctx context.Context, d Delivery) (Lookup, error)
}

// Lookup asks the bot whether it had d (docs/receiver.md, "Lookups"):
// a probe under d's own key, which a receiver that follows the contract
// de-duplicates like any message and never sends. A key it had sent is a
// repeat: 2xx with Idempotent-Replayed: true (or {"duplicate": true}), and
// Had. A key it did not have, it takes as new and sends nothing: 2xx, not
// Had, and the key is spent, so the original request, should it arrive
// after all, is dropped as a repeat. That is why a lookup is made only for
// a message that will not be sent: one no longer wanted.
func (w *Webhook) Lookup(ctx context.Context, d Delivery) (Lookup, error) {
	key := d.IdempotencyKey
	if key == "" {
		key = d.ID
	}
	body, err := marshalJSON(webhookBody{
		ID: d.ID, UserID: d.UserID, MessageType: ProbeType, MessageKey: d.Key, Params: map[string]string{},
		Locale: d.Locale, Destination: d.Destination, IdempotencyKey: key, Attempt: d.Attempt,
	})
	if err != nil {
		return Lookup{}, err
	}
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("Accept", "application/json")
	header.Set("User-Agent", userAgent)
	header.Set("Idempotency-Key", key)
	header.Set(ProbeHeader, "1")
	header.Set(LookupHeader, "1")
	if w.secret != "" {
		header.Set(signatureHeader, Sign(w.secret, body))
	}
	resp, err := w.http.post(ctx, w.url, header, body, newRedactor(w.secret))
	if err != nil {
		return Lookup{}, err
	}
	if !successStatus(resp.status) {
		// Classified as a send's answer would be: a 5xx or a 425 (the key
		// is being sent right now) is transient, to ask again; a 409 (the
		// key was claimed and never finished) or another 4xx is final.
		e := httpError(w.Name(), resp)
		e.Err = fmt.Errorf("%w: %w", ErrLookupUnanswered, e.Err)
		return Lookup{}, e
	}
	if !saysReplayed(probeAnswer(resp)) {
		return Lookup{}, nil
	}
	return Lookup{Had: true, ProviderMessageID: webhookMessageID(resp.body)}, nil
}
