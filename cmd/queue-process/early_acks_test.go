package main_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 55, finding 1, the bot's side: Baileys acks a message about a
// second after it sends it, and a bot forwards the ack (engagement_receipt)
// at once, often before queue-process has recorded the message id the bot
// answered with. This bot forwards a delivery ack for each message before
// it even answers: at the default pace, 30 of 40 acks were lost, and the
// message id was recorded p50 9.7 s after the answer (outcomes were
// written when the claimed batch ended). Every ack lands, and every
// message's id is recorded within a second of the bot's answer.
func TestAcksTheBotSendsBeforeItAnswersAreKept(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	pool, url := pgtest.NewPool(t)
	ctx := context.Background()
	const n = 12
	fixture.DueToRecipients(t, pool, n, "ack-")

	var mu sync.Mutex
	answered := map[string]time.Time{} // message id → when the bot answered, on the database's clock
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := "BAE5" + r.Header.Get("Idempotency-Key")
		if _, _, err := activity.Receipt(ctx, pool, id, activity.ReceiptDelivered, activity.ReceiptOptions{}); err != nil {
			t.Error(err)
		}
		at, err := fixture.ClockOf(ctx, pool)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		answered[id] = at
		mu.Unlock()
		_, _ = w.Write([]byte(`{"message_id":"` + id + `"}`))
	}))
	t.Cleanup(bot.Close)

	res := cmdtest.Run(t, bin, cmdtest.Env("DATABASE_URL="+url), "--transport", "webhook", "--webhook-url", bot.URL,
		"--send-interval", "500ms", "--output", "json")
	if sum := queueSummary(t, res); sum.Sent != n {
		t.Fatalf("sent %d of %d", sum.Sent, n)
	}
	var lost int
	var slowest time.Duration
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{}) {
		if !strings.HasPrefix(m.Key(), "ack-") {
			continue
		}
		if m.ProviderMessageID == nil || m.SentAt == nil {
			t.Fatalf("message %s: provider id %v, sent at %v; want both recorded", m.Key(), m.ProviderMessageID, m.SentAt)
		}
		if m.DeliveredAt == nil {
			lost++
		}
		mu.Lock()
		slowest = max(slowest, m.SentAt.Sub(answered[*m.ProviderMessageID]))
		mu.Unlock()
	}
	if lost != 0 {
		t.Errorf("%d of %d acks sent before the bot answered were lost", lost, n)
	}
	if slowest > time.Second {
		t.Errorf("a message id was recorded %s after the bot answered with it; want within a second", slowest)
	}
}
