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
	// TakenAsNew: that 2xx, the first answer for a fresh key, did not
	// call the probe a repeat (no Idempotent-Replayed: true, no
	// "duplicate": true). queue-process records a message as sent on a
	// replayed answer, so a receiver that calls a first delivery a
	// repeat has every message marked sent while it sends nothing.
	TakenAsNew bool `json:"taken_as_new"`
	// RepeatDropped: the same probe again, under the same Idempotency-Key,
	// got a 2xx that says the repeat was dropped (Idempotent-Replayed:
	// true, or a JSON body with "duplicate": true).
	RepeatDropped bool `json:"repeat_dropped"`
	OK            bool `json:"ok"`
	// Statuses are the three answers' HTTP statuses, in order (0: none).
	Statuses []int `json:"statuses"`
	// Problems says, one sentence per failed check, why it failed; empty
	// when OK.
	Problems []string `json:"problems,omitempty"`
	// Error says why a step got no answer at all.
	Error string `json:"error,omitempty"`
}

// ErrUnreachable is CheckReceiver's error when a probe got no answer.
var ErrUnreachable = errors.New("the receiver did not answer")

// CheckReceiver sends a probe to the webhook at rawURL three times: with a
// wrong signature (want a 4xx), signed with secret under a fresh
// Idempotency-Key (want a 2xx that takes it as new: not replayed), and
// signed again under the same key (want a 2xx that says the repeat was
// dropped); the report's Problems say why each failed check failed. The
// probe is a webhook request like any message's, but marked (ProbeHeader,
// message_type "probe", no JID), so that a receiver following
// docs/receiver.md messages nobody. A probe that gets no answer ends the
// check with ErrUnreachable; the report says how far it got.
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
	key, body, err := probeBody()
	if err != nil {
		return rep, err
	}
	p := prober{client: newClient(nil), url: rawURL, secret: secret, key: key, body: body, timeout: timeout, rep: &rep}

	a, err := p.send(ctx, 1, Sign(secret+"-wrong", body))
	if err != nil {
		return rep, err
	}
	rep.SignatureChecked = a.status >= 400 && a.status <= 499
	if !rep.SignatureChecked {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the probe with a wrong signature got HTTP %d, not a 4xx: the receiver did not refuse a forged request", a.status))
	}
	if a, err = p.send(ctx, 2, Sign(secret, body)); err != nil {
		return rep, err
	}
	rep.Answered = successStatus(a.status)
	rep.TakenAsNew = rep.Answered && !saysReplayed(a)
	switch {
	case !rep.Answered && (a.status == http.StatusUnauthorized || a.status == http.StatusForbidden):
		rep.Problems = append(rep.Problems, fmt.Sprintf("the signed probe got HTTP %d, not a 2xx: is --webhook-secret the receiver's secret?", a.status))
	case !rep.Answered:
		rep.Problems = append(rep.Problems, fmt.Sprintf("the signed probe got HTTP %d, not a 2xx", a.status))
	case !rep.TakenAsNew:
		rep.Problems = append(rep.Problems, "the first delivery of a fresh key was answered as a repeat ("+replayedBy(a)+
			"): queue-process would record every message as sent while the receiver sends nothing")
	}
	if a, err = p.send(ctx, 3, Sign(secret, body)); err != nil {
		return rep, err
	}
	rep.RepeatDropped = successStatus(a.status) && saysReplayed(a)
	if !rep.RepeatDropped {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the repeat under the same Idempotency-Key got HTTP %d, not a 2xx with %s: true or {\"duplicate\":true}: "+
			"after a crash of queue-process a message could be sent twice", a.status, ReplayedHeader))
	}
	rep.OK = rep.SignatureChecked && rep.Answered && rep.TakenAsNew && rep.RepeatDropped
	return rep, nil
}

// probeBody is the probe's request body, under a fresh idempotency key: a
// message's webhook body, marked as a probe (message_type "probe", a user
// id of zeros, no JID) so that a receiver messages nobody.
func probeBody() (key string, body []byte, err error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	key = "probe:" + hex.EncodeToString(b[:])
	body, err = marshalJSON(webhookBody{
		ID: key, UserID: "00000000-0000-0000-0000-000000000000", MessageType: ProbeType, MessageKey: "engagement.probe",
		Params: map[string]string{}, Locale: "en", Text: "probe", Destination: "individual", IdempotencyKey: key, Attempt: 1,
	})
	return key, body, err
}

// prober sends CheckReceiver's probes: the same body under the same key to
// the same webhook, each with the signature it is given, noting each
// answer's status in rep.
type prober struct {
	client  *http.Client
	url     string
	secret  string
	key     string
	body    []byte
	timeout time.Duration
	rep     *ProbeReport
}

// send sends the probe once, as the step-th probe; the answer's body is
// read and closed inside.
func (p prober) send(ctx context.Context, step int, signature string) (probeAnswer, error) {
	reqCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, p.url, bytes.NewReader(p.body))
	if err != nil {
		return probeAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Idempotency-Key", p.key)
	req.Header.Set(ProbeHeader, "1")
	req.Header.Set(signatureHeader, signature)
	// Sent once each: a probe the client resent on its own would
	// reach the receiver as a repeat it did not mean (noReplay).
	noReplay(req)
	resp, err := p.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && ue.Err != nil {
			err = ue.Err // url.Error quotes the URL, which may hold credentials
		}
		return probeAnswer{}, fmt.Errorf("%w: probe %d: %s", ErrUnreachable, step, oneLine(newRedactor(p.secret).apply(err.Error())))
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	p.rep.Statuses[step-1] = resp.StatusCode
	return probeAnswer{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// probeAnswer is what one probe request got back.
type probeAnswer struct {
	status int
	header http.Header
	body   []byte
}

// saysReplayed reports whether a 2xx answer says the receiver dropped the
// request as a repeat: Idempotent-Replayed: true, or a JSON body with
// "duplicate": true.
func saysReplayed(a probeAnswer) bool {
	return successStatus(a.status) && (replayedHeader(a) || saysDuplicate(a.body))
}

func replayedHeader(a probeAnswer) bool {
	return strings.EqualFold(strings.TrimSpace(a.header.Get(ReplayedHeader)), "true")
}

// replayedBy names what in a said it was a repeat.
func replayedBy(a probeAnswer) string {
	if replayedHeader(a) {
		return ReplayedHeader + ": true"
	}
	return `{"duplicate":true}`
}

// saysDuplicate reports whether body is a JSON object with "duplicate": true.
func saysDuplicate(body []byte) bool {
	var obj struct {
		Duplicate bool `json:"duplicate"`
	}
	return json.Unmarshal(body, &obj) == nil && obj.Duplicate
}
