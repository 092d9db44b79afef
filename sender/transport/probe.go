package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The receiver's side of the webhook contract that a probe checks
// (docs/receiver.md):
const (
	// ProbeHeader marks a probe request: the receiver answers it like a
	// message (signature, de-duplication) but sends nothing to WhatsApp.
	ProbeHeader = "X-Engagement-Probe"
	// ProbeType is a probe's message_type.
	ProbeType = "probe"
	// ReplayedHeader is what a receiver answers a repeated Idempotency-Key
	// with, beside a 2xx: "true" says it dropped the repeat.
	ReplayedHeader = "Idempotent-Replayed"
)

// ProbeReport is what CheckReceiver found.
type ProbeReport struct {
	Host string `json:"url_host"`
	// SignatureChecked: the receiver refused the probe with a wrong
	// signature (a 4xx).
	SignatureChecked bool `json:"signature_checked"`
	// Answered: the correctly signed probe got a 2xx.
	Answered bool `json:"answered"`
	// RepeatDropped: the same probe again, under the same Idempotency-Key,
	// got a 2xx that says the repeat was dropped (Idempotent-Replayed:
	// true, or a JSON body with "duplicate": true).
	RepeatDropped bool `json:"repeat_dropped"`
	OK            bool `json:"ok"`
	// Statuses are the three answers' HTTP statuses, in order (0: none).
	Statuses []int `json:"statuses"`
	// Error says why a step got no answer at all.
	Error string `json:"error,omitempty"`
}

// ErrUnreachable is CheckReceiver's error when a probe got no answer.
var ErrUnreachable = errors.New("the receiver did not answer")

// CheckReceiver sends a probe to the webhook at rawURL three times: with a
// wrong signature, signed with secret, and signed again under the same
// Idempotency-Key. The probe is a webhook request like any message's, but
// marked (ProbeHeader, message_type "probe", no JID), so that a receiver
// following docs/receiver.md messages nobody. A probe that gets no answer
// ends the check with ErrUnreachable; the report says how far it got.
func CheckReceiver(ctx context.Context, rawURL, secret string, timeout time.Duration) (ProbeReport, error) {
	rep := ProbeReport{Statuses: []int{0, 0, 0}}
	if err := validateEndpoint(rawURL); err != nil {
		return rep, errors.New("webhook: " + err.Error())
	}
	if u, err := url.Parse(rawURL); err == nil {
		rep.Host = u.Host
	}
	if secret == "" {
		return rep, errors.New("a probe needs the webhook secret: without one it cannot check the signature")
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := "probe:" + hex.EncodeToString(b[:])
	body, err := marshalJSON(webhookBody{
		ID: key, UserID: "00000000-0000-0000-0000-000000000000", MessageType: ProbeType, MessageKey: "engagement.probe",
		Params: map[string]string{}, Locale: "en", Text: "probe", Destination: "individual", IdempotencyKey: key, Attempt: 1,
	})
	if err != nil {
		return rep, err
	}
	client := newClient(nil)
	// answer is what one probe request got back; the body is read and
	// closed inside send.
	type answer struct {
		status int
		header http.Header
		body   []byte
	}
	send := func(step int, signature string) (answer, error) {
		reqCtx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, rawURL, bytes.NewReader(body))
		if err != nil {
			return answer{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", userAgent)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set(ProbeHeader, "1")
		req.Header.Set(signatureHeader, signature)
		resp, err := client.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) && ue.Err != nil {
				err = ue.Err // url.Error quotes the URL, which may hold credentials
			}
			return answer{}, fmt.Errorf("%w: probe %d: %s", ErrUnreachable, step, oneLine(newRedactor(secret).apply(err.Error())))
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		rep.Statuses[step-1] = resp.StatusCode
		return answer{status: resp.StatusCode, header: resp.Header, body: data}, nil
	}

	a, err := send(1, Sign(secret+"-wrong", body))
	if err != nil {
		return rep, err
	}
	rep.SignatureChecked = a.status >= 400 && a.status <= 499
	if a, err = send(2, Sign(secret, body)); err != nil {
		return rep, err
	}
	rep.Answered = successStatus(a.status)
	if a, err = send(3, Sign(secret, body)); err != nil {
		return rep, err
	}
	rep.RepeatDropped = successStatus(a.status) && (strings.EqualFold(strings.TrimSpace(a.header.Get(ReplayedHeader)), "true") || saysDuplicate(a.body))
	rep.OK = rep.SignatureChecked && rep.Answered && rep.RepeatDropped
	return rep, nil
}

// saysDuplicate reports whether body is a JSON object with "duplicate": true.
func saysDuplicate(body []byte) bool {
	var obj struct {
		Duplicate bool `json:"duplicate"`
	}
	return json.Unmarshal(body, &obj) == nil && obj.Duplicate
}
