package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Meta's throughput ceilings, in messages per second per registered
// business phone number (Meta, "Throughput",
// https://developers.facebook.com/documentation/business-messaging/whatsapp/throughput):
// 80 by default, 1,000 after Meta's automatic upgrade, and a fixed 20 for a
// number in use with both the WhatsApp Business app and Cloud API
// ("coexistence"). Throughput counts inbound and outbound messages alike;
// above it Meta answers error 130429 "until you are within your allowed
// level again".
const (
	ThroughputStandard    = 80
	ThroughputHigh        = 1000
	ThroughputCoexistence = 20
)

// Throughput is what the Phone Number node says about the number's
// throughput (GET /{phone-number-id}?fields=throughput,is_on_biz_app).
//
// The fields are throughput ({"level": "STANDARD" | "HIGH"}; Meta's
// "Throughput" page points to this node for the level) and is_on_biz_app
// (a boolean: the number is in use with the WhatsApp Business app too).
// Meta's Phone Number node reference could not be read when this was
// written, so their types here are the ones the Graph API is reported to
// answer (docs/delivery.md, "Meta's throughput"); anything else, and
// "NOT_APPLICABLE", is no answer: the caller keeps the safe side.
type Throughput struct {
	// Level is STANDARD or HIGH; "" when the answer did not say either.
	Level string
	// OnBizApp is is_on_biz_app: whether the number is in use with the
	// WhatsApp Business app too; nil when the answer did not carry it as a
	// boolean (the caller keeps what it knew: delivery).
	OnBizApp *bool
	// Problems names what was missing or of the wrong type.
	Problems []string
}

// Ceiling is the messages per second Meta allows the number, as this
// answer says: 20 on the Business app, 1,000 at HIGH, 80 at STANDARD; 0
// when the answer gave no level (the caller keeps the safe side).
func (t Throughput) Ceiling() int {
	switch {
	case t.OnBizApp != nil && *t.OnBizApp:
		return ThroughputCoexistence
	case t.Level == "HIGH":
		return ThroughputHigh
	case t.Level == "STANDARD":
		return ThroughputStandard
	}
	return 0
}

// ThroughputReader is a transport that can read its number's throughput
// level (the Cloud API's), and the ceiling its operator set.
type ThroughputReader interface {
	ReadThroughput(ctx context.Context) (Throughput, error)
	// ThroughputLimits is what the operator said: a ceiling (0: none
	// given) and whether the number is on the Business app whatever Meta
	// says (--whatsapp-throughput, --whatsapp-coexistence).
	ThroughputLimits() (ceiling int, coexistence bool)
	// NumberID names the number the ceiling belongs to.
	NumberID() string
}

// ReadThroughput asks the Graph API for the number's throughput level and
// whether it is on the WhatsApp Business app. An answer that is not a JSON
// object, a status other than 200, or no answer within 5 s is an error; a
// field missing or of another type is left empty and named in Problems.
func (w *WhatsApp) ReadThroughput(ctx context.Context) (Throughput, error) {
	fields, err := w.readNumber(ctx, "throughput,is_on_biz_app")
	if err != nil {
		return Throughput{}, fmt.Errorf("whatsapp throughput: %w", err)
	}
	var t Throughput
	var level struct {
		Level string `json:"level"`
	}
	switch raw, ok := fields["throughput"]; {
	case !ok || strings.TrimSpace(string(raw)) == "null":
		t.Problems = append(t.Problems, "throughput missing")
	case json.Unmarshal(raw, &level) != nil || (level.Level != "STANDARD" && level.Level != "HIGH"):
		t.Problems = append(t.Problems, "throughput.level not STANDARD or HIGH")
	default:
		t.Level = level.Level
	}
	var onBizApp *bool
	if raw, ok := fields["is_on_biz_app"]; ok && (json.Unmarshal(raw, &onBizApp) != nil || onBizApp == nil) {
		t.Problems = append(t.Problems, "is_on_biz_app not a boolean")
		onBizApp = nil
	}
	t.OnBizApp = onBizApp
	return t, nil
}

// ThroughputLimits returns --whatsapp-throughput and --whatsapp-coexistence.
func (w *WhatsApp) ThroughputLimits() (int, bool) { return w.throughput, w.coexistence }

// NumberID is the Cloud API phone number id.
func (w *WhatsApp) NumberID() string { return w.phoneNumberID }

// readNumber GETs the Phone Number node's fields as raw JSON values: an
// error for no answer in 5 s, a status other than 200 or a body that is
// not a JSON object. Its errors never name the number or the token.
func (w *WhatsApp) readNumber(ctx context.Context, fields string) (map[string]json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	url := strings.TrimSuffix(w.endpoint, "/messages") + "?fields=" + fields
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := w.http.client.Do(req)
	if err != nil {
		return nil, scrubURL(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the Graph API answered %d", resp.StatusCode)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(body, &out); err != nil || out == nil {
		return nil, errors.New("the Graph API's answer is not a JSON object")
	}
	return out, nil
}
