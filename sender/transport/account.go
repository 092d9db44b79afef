package transport

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"
)

// The kinds of an account refusal: the bot says WhatsApp refuses its whole
// account, not one message (../shared/CONTRACT.md, round seven, "An
// unofficial number's limits"). What Baileys users report behind each:
//
//   - reachout_timelock: WhatsApp's error 463, an account-level
//     restriction on writing first with an unlock time
//     (WhiskeySockets/Baileys#2441; #1983: 24 h, then 48 h restrictions).
//   - rate_overlimit: the server's "rate-overlimit", data 429, to a
//     sendMessage (Itsukichann/Baileys#56; WhiskeySockets/Baileys#1248:
//     429 at about 3 messages/s).
//   - logged_out: the linked device was logged out
//     (DisconnectReason.loggedOut); only re-linking it ends it.
//   - banned: the number was banned (a 403 at connect); only an appeal
//     to WhatsApp ends it.
const (
	AccountReachoutTimelock = "reachout_timelock"
	AccountRateOverlimit    = "rate_overlimit"
	AccountLoggedOut        = "logged_out"
	AccountBanned           = "banned"
)

// AccountKinds lists the kinds of an account refusal, in the contract's
// order.
var AccountKinds = []string{AccountReachoutTimelock, AccountRateOverlimit, AccountLoggedOut, AccountBanned}

// MaxAccountPause caps the wait an account refusal asks for: a bot that
// says a year is taken at its word for a week, and asked again then.
const MaxAccountPause = 7 * 24 * time.Hour

// DefaultAccountPause is the wait of an account refusal whose
// retry_after_s is missing or unusable (not a non-negative integer), by
// kind: an hour for a rate limit (Baileys reports give none; the rate is
// per hour at most in every report we know), a day for a reach-out
// timelock (#1983's first restriction lasted 24 h). logged_out and banned
// have none: 0, the pause lasts until an operator clears it, since only a
// person can re-link the device or appeal.
var DefaultAccountPause = map[string]time.Duration{
	AccountRateOverlimit:    time.Hour,
	AccountReachoutTimelock: 24 * time.Hour,
	AccountLoggedOut:        0,
	AccountBanned:           0,
}

// AccountError is a refusal of the whole account: nothing is to be sent
// through the transport until RetryAfter has passed (0: until an operator
// clears the pause). It wraps the *Error of the answer (its status, not
// permanent: the message is not at fault), so errors.As finds both.
type AccountError struct {
	Kind       string        // one of AccountKinds
	RetryAfter time.Duration // 0: no end of its own
	Err        *Error
}

// Error names the kind and the wait; never the body beyond its words.
func (e *AccountError) Error() string { return e.Err.Error() }

// Unwrap returns the *Error of the answer.
func (e *AccountError) Unwrap() error { return e.Err }

// accountStatus reports whether status may carry an account refusal.
func accountStatus(status int) bool {
	switch status {
	case http.StatusConflict, http.StatusTooManyRequests, http.StatusUnauthorized, http.StatusForbidden:
		return true
	}
	return false
}

// accountError reads an account refusal from a webhook's answer: nil
// unless its status is one that may carry one and its body a JSON object
// whose "account_error" is one of AccountKinds.
func accountError(name string, resp response) *AccountError {
	if !accountStatus(resp.status) {
		return nil
	}
	var body struct {
		Kind       any             `json:"account_error"`
		RetryAfter json.RawMessage `json:"retry_after_s"`
	}
	if json.Unmarshal(resp.body, &body) != nil {
		return nil
	}
	kind, _ := body.Kind.(string)
	wait, known := DefaultAccountPause[kind]
	if !known {
		return nil
	}
	if s, ok := retryAfterSeconds(body.RetryAfter); ok {
		wait = min(time.Duration(s)*time.Second, MaxAccountPause)
	}
	until := "until cleared"
	if wait > 0 {
		until = "for " + wait.String()
	}
	err := &Error{StatusCode: resp.status, transport: name,
		Err: fmt.Errorf("HTTP %d: the account is refused (%s), paused %s", resp.status, kind, until)}
	return &AccountError{Kind: kind, RetryAfter: wait, Err: err}
}

// retryAfterSeconds is retry_after_s when it is a non-negative integer
// (capped so that it converts to a Duration).
func retryAfterSeconds(raw json.RawMessage) (int64, bool) {
	var f float64
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil || f < 0 || f != math.Trunc(f) {
		return 0, false
	}
	return int64(min(f, MaxAccountPause.Seconds())), true
}

// AccountReporter is a transport whose receiver may refuse the whole
// account (an *AccountError): queue-process then reads and records the
// transport's pause.
type AccountReporter interface {
	ReportsAccountErrors() bool
}
