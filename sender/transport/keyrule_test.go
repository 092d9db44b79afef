package transport_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/engagement-scheduler/engagement/sender"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// FuzzWebhookKeyRule: the webhook sends a stored key exactly when
// sender.ValidateKey, the rule enqueue applies (through NormalizeKey),
// accepts it; a key it refuses fails for good, before any request, for
// ValidateKey's reason. So a key enqueue accepts never fails at delivery,
// and a key delivery refuses is refused by enqueue (issue 31, item 8).
func FuzzWebhookKeyRule(f *testing.F) {
	for _, seed := range []string{
		"u1:goodbye_sent:2026-11-23", "manual review 48", "revisão · 48 🎉", "a\u00a0b", strings.Repeat("é", 128),
		"k\r\nX-Injected: 1", "a\nb", "a\tb", "a\ab", "a\x00b", "a\x7fb", "a\u0085b", "a\x1b[0m", "a\xffb",
		strings.Repeat("k", 129), " k", "k ", "   ", "\u2028k", "k\u00a0",
	} {
		f.Add(seed)
	}
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	f.Cleanup(srv.Close)
	wh, err := transport.NewWebhook(transport.WebhookConfig{URL: srv.URL, Secret: testSecret})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if key == "" {
			return // no key: the webhook sends the message id
		}
		d := delivery()
		d.IdempotencyKey = key
		before := requests.Load()
		_, sendErr := wh.Send(context.Background(), d)
		sent := requests.Load() > before
		rule := sender.ValidateKey(key)
		switch {
		case rule == nil && (sendErr != nil || !sent):
			t.Fatalf("key %q: ValidateKey accepts it, the webhook did not send it: %v", key, sendErr)
		case rule != nil && (sendErr == nil || sent):
			t.Fatalf("key %q: ValidateKey refuses it (%v), the webhook sent it", key, rule)
		case rule != nil:
			terr := asError(t, sendErr)
			if !terr.Permanent || !errors.Is(sendErr, sender.ErrInvalidKey) || !strings.Contains(sendErr.Error(), rule.Error()) {
				t.Fatalf("key %q: webhook error %v (permanent %v), want a permanent error for the rule's reason %q", key, sendErr, terr.Permanent, rule)
			}
			checkNoLeak(t, sendErr)
		}
		// One rule: a key passes exactly when NormalizeKey (enqueue)
		// returns it unchanged.
		if norm, normErr := sender.NormalizeKey(key); (normErr == nil && norm == key) != (rule == nil) {
			t.Fatalf("key %q: NormalizeKey says %q, %v; ValidateKey says %v: two rules", key, norm, normErr, rule)
		}
	})
}
