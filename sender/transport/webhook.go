package transport

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/engagement-scheduler/engagement/sender"
)

// signatureHeader carries the HMAC-SHA256 of a webhook request's body.
const signatureHeader = "X-Engagement-Signature"

const signaturePrefix = "sha256="

// WebhookConfig configures a Webhook.
type WebhookConfig struct {
	URL     string
	Secret  string        // optional; when set, sign
	Timeout time.Duration // per request; default 10s
	Client  *http.Client  // optional, for tests
}

// Webhook POSTs each delivery as JSON to the bot, which sends it on
// WhatsApp and de-duplicates by the Idempotency-Key header.
//
// The request is a public contract:
//
//	POST <url>
//	Content-Type: application/json
//	Idempotency-Key: <idempotency key>
//	X-Engagement-Signature: sha256=<hex HMAC-SHA256(secret, body)>   (with a secret)
//
//	{"id","user_id","message_type","message_key","params","locale","text",
//	 "destination","destination_jid","idempotency_key","attempt"}
//
// Any 2xx is delivered; the response's string "message_id" (or "id"), when
// it is a JSON object, is the provider message id. Redirects are not
// followed (a 3xx is a permanent failure). A 409, 429, 401 or 403 whose
// body names an "account_error" refuses the whole account, not the
// message: an *AccountError (account.go).
type Webhook struct {
	url    string
	secret string
	http   httpCaller
}

// NewWebhook validates cfg and returns a Webhook. Its errors never contain
// the secret (nor the URL, which may carry credentials).
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if err := validateEndpoint(cfg.URL); err != nil {
		return nil, errors.New("webhook: " + err.Error())
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	return &Webhook{
		url:    cfg.URL,
		secret: cfg.Secret,
		http:   httpCaller{name: "webhook", client: newClient(cfg.Client), timeout: timeout},
	}, nil
}

// Name returns "webhook".
func (w *Webhook) Name() string { return "webhook" }

// ReachoutLimited marks the webhook as held to the reach-out window: the
// bot behind it sends as an ordinary WhatsApp account (ReachoutLimited).
func (w *Webhook) ReachoutLimited() {}

// ReportsAccountErrors returns true: the bot may refuse the whole account
// (account.go).
func (w *Webhook) ReportsAccountErrors() bool { return true }

// Deduplicates returns true: the bot drops a repeated Idempotency-Key.
func (w *Webhook) Deduplicates() bool { return true }

// webhookBody is the request body; its fields are the public contract.
type webhookBody struct {
	ID             string            `json:"id"`
	UserID         string            `json:"user_id"`
	MessageType    string            `json:"message_type"`
	MessageKey     string            `json:"message_key"`
	Params         map[string]string `json:"params"`
	Locale         string            `json:"locale"`
	Text           string            `json:"text"`
	Destination    string            `json:"destination"`
	DestinationJID string            `json:"destination_jid"`
	IdempotencyKey string            `json:"idempotency_key"`
	Attempt        int               `json:"attempt"`
}

// Send POSTs d to the webhook.
func (w *Webhook) Send(ctx context.Context, d Delivery) (Result, error) {
	key := d.IdempotencyKey
	if key == "" {
		key = d.ID
	}
	// The one rule for a key, enqueue's too: a key it refuses cannot have
	// been queued through the project, and sending it would put a broken
	// header on the wire, so it fails for good, for enqueue's reason.
	if err := sender.ValidateKey(key); err != nil {
		return Result{}, &Error{Err: fmt.Errorf("%w (permanent)", err), Permanent: true, transport: w.Name()}
	}
	params := d.Params
	if params == nil {
		params = map[string]string{}
	}
	body, err := marshalJSON(webhookBody{
		ID: d.ID, UserID: d.UserID, MessageType: d.Type, MessageKey: d.Key, Params: params,
		Locale: d.Locale, Text: d.Text, Destination: d.Destination, DestinationJID: d.DestinationJID,
		IdempotencyKey: key, Attempt: d.Attempt,
	})
	if err != nil {
		return Result{}, &Error{Err: errors.New("cannot encode request (permanent)"), Permanent: true, transport: w.Name()}
	}

	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("Accept", "application/json")
	header.Set("User-Agent", userAgent)
	header.Set("Idempotency-Key", key)
	if w.secret != "" {
		header.Set(signatureHeader, Sign(w.secret, body))
	}

	red := newRedactor(w.secret, d.DestinationJID, jidUser(d.DestinationJID), d.Text)
	resp, err := w.http.post(ctx, w.url, header, body, red)
	if err != nil {
		return Result{}, err
	}
	if acct := accountError(w.Name(), resp); acct != nil {
		return Result{}, acct
	}
	if !successStatus(resp.status) {
		return Result{}, httpError(w.Name(), resp)
	}
	return Result{ProviderMessageID: webhookMessageID(resp.body)}, nil
}

// webhookMessageID is the string "message_id", else "id", of a JSON object
// body; "" otherwise.
func webhookMessageID(body []byte) string {
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	for _, k := range []string{"message_id", "id"} {
		if s, ok := obj[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// Sign returns the X-Engagement-Signature of body: "sha256=" and the
// lowercase hex HMAC-SHA256 of body keyed with secret.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return signaturePrefix + hex.EncodeToString(mac.Sum(nil))
}

// VerifySignature reports, in constant time, whether header is body's
// signature under secret (as made by Sign). An empty secret verifies
// nothing. It is the bot's API: the receiving end of the webhook checks
// X-Engagement-Signature with it.
func VerifySignature(secret string, body []byte, header string) bool {
	if secret == "" {
		return false
	}
	h := strings.TrimSpace(header)
	if len(h) < len(signaturePrefix) || !strings.EqualFold(h[:len(signaturePrefix)], signaturePrefix) {
		return false
	}
	got, err := hex.DecodeString(h[len(signaturePrefix):])
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

const userAgent = "engagement-scheduler-transport/1"

// marshalJSON encodes v without HTML escaping and without a trailing newline.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// jidUser is the part of a JID before '@' ("5511999990000" of
// "5511999990000@s.whatsapp.net"), or the JID itself without an '@'.
func jidUser(jid string) string {
	user, _, _ := strings.Cut(strings.TrimSpace(jid), "@")
	return user
}
