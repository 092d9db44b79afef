package transport_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// Issue 55, finding 8: net/http sends a request carrying an
// Idempotency-Key again, on a new connection, when a kept-alive connection
// dies after the request was written. No transport lets it: the receiver
// reads the request once, and the caller gets the failure, in doubt
// (MaybeDelivered), not an outage, to decide on after its own checks.
//
// The receiver is a raw TCP one that answers the first request 200 on a
// connection it keeps open, then reads the next request on that reused
// connection and resets it; a third request would be answered 200.
func TestAKeptAliveConnectionThatDiesIsNeverResentByTheClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	check := func(t *testing.T, err error, requests, want int) {
		t.Helper()
		if requests != want {
			t.Errorf("the receiver read %d requests, want %d: the reset one once", requests, want)
		}
		terr := asError(t, err)
		if !terr.MaybeDelivered || terr.Unreachable || terr.Permanent || terr.Outage() || transport.Class(err) != transport.ClassUnknown {
			t.Errorf("reset after the request was read: %+v (%s), want in doubt (unknown), not an outage", terr, transport.Class(err))
		}
	}

	t.Run("webhook", func(t *testing.T) {
		t.Parallel()
		bot := webhooktest.New(t)
		w := newWebhook(t, transport.WebhookConfig{URL: bot.URL, Secret: testSecret})
		first, second := delivery(), delivery()
		first.IdempotencyKey, second.IdempotencyKey = "replay-test:first", "replay-test:second"
		bot.Script(first.IdempotencyKey, webhooktest.KeepAlive())
		bot.Script(second.IdempotencyKey, webhooktest.Reset(), webhooktest.OK())
		if _, err := w.Send(ctx, first); err != nil {
			t.Fatal(err)
		}
		_, err := w.Send(ctx, second)
		check(t, err, len(bot.ByKey(second.IdempotencyKey)), 1)
	})

	t.Run("whatsapp-cloud", func(t *testing.T) {
		t.Parallel()
		// The Cloud API's requests carry no Idempotency-Key: every one is
		// the receiver's key "".
		bot := webhooktest.New(t, webhooktest.KeepAlive(), webhooktest.Reset(), webhooktest.OK())
		w := newWhatsApp(t, bot.URL)
		if _, err := w.Send(ctx, delivery()); err != nil {
			t.Fatal(err)
		}
		_, err := w.Send(ctx, delivery())
		check(t, err, len(bot.Requests()), 2)
	})

	t.Run("probe", func(t *testing.T) {
		t.Parallel()
		// The probe's first request is answered 200 (no signature check:
		// a problem the report names) on a kept connection; the second,
		// on it, is reset. Resent, it would be answered and the probe go
		// on to its third request.
		bot := webhooktest.New(t, webhooktest.KeepAlive(), webhooktest.Reset(), webhooktest.OK())
		rep, err := transport.CheckReceiver(ctx, bot.URL, testSecret, 10*time.Second)
		if !errors.Is(err, transport.ErrUnreachable) {
			t.Errorf("CheckReceiver: %v, want ErrUnreachable (the second probe got no answer)", err)
		}
		if got := len(bot.Requests()); got != 2 || rep.Statuses[1] != 0 {
			t.Errorf("the receiver read %d probes (statuses %v), want 2, the second unanswered", got, rep.Statuses)
		}
	})
}
