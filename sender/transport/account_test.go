package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// Issue 58 (../shared/CONTRACT.md, round seven, "An unofficial number's
// limits"): the bot refuses its whole WhatsApp account, not one message,
// with 409, 429, 401 or 403 and a JSON body naming the account_error. The
// webhook returns a *transport.AccountError with its kind and how long to
// wait (retry_after_s, capped at 7 days; a missing or unusable one gets
// the kind's default; logged_out and banned: 0, until an operator clears
// the pause). Before, each was one message's failure.
func TestWebhookAccountRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
		kind   string
		wait   time.Duration
	}{
		{"rate limited", 429, `{"account_error":"rate_overlimit","retry_after_s":600}`, "rate_overlimit", 10 * time.Minute},
		{"rate limited, no wait", 429, `{"account_error":"rate_overlimit"}`, "rate_overlimit", time.Hour},
		{"reach-out timelock", 409, `{"account_error":"reachout_timelock","retry_after_s":7200}`, "reachout_timelock", 2 * time.Hour},
		{"timelock, negative wait", 409, `{"account_error":"reachout_timelock","retry_after_s":-5}`, "reachout_timelock", 24 * time.Hour},
		{"timelock, fractional wait", 409, `{"account_error":"reachout_timelock","retry_after_s":1.5}`, "reachout_timelock", 24 * time.Hour},
		{"timelock, string wait", 409, `{"account_error":"reachout_timelock","retry_after_s":"60"}`, "reachout_timelock", 24 * time.Hour},
		{"a year's wait is capped", 429, `{"account_error":"rate_overlimit","retry_after_s":31536000}`, "rate_overlimit", 7 * 24 * time.Hour},
		{"logged out", 401, `{"account_error":"logged_out","retry_after_s":0}`, "logged_out", 0},
		{"logged out, a wait is taken", 401, `{"account_error":"logged_out","retry_after_s":300}`, "logged_out", 5 * time.Minute},
		{"banned", 403, `{"account_error":"banned"}`, "banned", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			_, err := newWebhook(t, transport.WebhookConfig{URL: srv.URL}).Send(context.Background(), delivery())
			var acct *transport.AccountError
			if !errors.As(err, &acct) {
				t.Fatalf("error %v (%T); want a *transport.AccountError", err, err)
			}
			if acct.Kind != tt.kind || acct.RetryAfter != tt.wait {
				t.Errorf("account error %q, wait %s; want %q, %s", acct.Kind, acct.RetryAfter, tt.kind, tt.wait)
			}
			if terr := asError(t, err); terr.StatusCode != tt.status || terr.Permanent {
				t.Errorf("status %d, permanent %v; want %d, not permanent (the message is not at fault)", terr.StatusCode, terr.Permanent, tt.status)
			}
			if got := transport.Class(err); got != transport.ClassAccount {
				t.Errorf("class %q; want %q", got, transport.ClassAccount)
			}
			checkNoLeak(t, err, testJID, testPhone, testText, `"account_error"`)
		})
	}
}

// The same statuses without a usable account_error keep their meaning for
// one message (409: the key was claimed and never finished, permanent; 429:
// a retry of this message later); so does an account_error on another
// status, or a word the contract does not have.
func TestWebhookStatusesWithoutAnAccountErrorKeepTheirMeaning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		body      string
		permanent bool
	}{
		{"409, empty body", 409, ``, true},
		{"409, other JSON", 409, `{"error":"duplicate"}`, true},
		{"429, empty body", 429, ``, false},
		{"401, not JSON", 401, `unauthorized`, true},
		{"403, unknown word", 403, `{"account_error":"suspended"}`, true},
		{"403, word not a string", 403, `{"account_error":1}`, true},
		{"500 with an account body", 500, `{"account_error":"banned"}`, false},
		{"400 with an account body", 400, `{"account_error":"banned"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			_, err := newWebhook(t, transport.WebhookConfig{URL: srv.URL}).Send(context.Background(), delivery())
			var acct *transport.AccountError
			if errors.As(err, &acct) {
				t.Fatalf("error %v is an account error; want one message's failure", err)
			}
			if terr := asError(t, err); terr.StatusCode != tt.status || terr.Permanent != tt.permanent {
				t.Errorf("status %d, permanent %v; want %d, %v", terr.StatusCode, terr.Permanent, tt.status, tt.permanent)
			}
		})
	}
}
