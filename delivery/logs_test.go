package delivery_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/syncbuf"
)

// Issue 24: no delivery success was ever logged, and failure lines lacked
// the user and the message type. Every attempt now leaves one line with
// the message id, user id, type, transport, attempt and latency (info when
// delivered), and never the JID or the text.
func TestEveryAttemptIsOneLogLineWithItsIDs(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	rcv := newReceiver(t, 200, 400)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: fixture.Ptr("5511987654321@s.whatsapp.net")})
	delivered := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-2*time.Minute))
	var logs syncbuf.Buffer
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{Transport: webhook(t, rcv.server.URL, "s3cret"), SendInterval: -1,
		Workers: 1, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	rejected := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))
	if _, err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}

	lines := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if id, ok := l["message_id"].(string); ok {
			lines[id+" "+l["message"].(string)] = l
		}
	}
	for _, want := range []struct{ id, msg, level string }{
		{delivered, "message delivered", "info"},
		{rejected, "message failed", "error"},
	} {
		l, ok := lines[want.id+" "+want.msg]
		if !ok {
			t.Errorf("no %q line for message %s in:\n%s", want.msg, want.id, logs.String())
			continue
		}
		if l["level"] != want.level || l["user_id"] != user || l["message_type"] != fixture.WeeklyReview.Type() ||
			l["transport"] != "webhook" || l["attempt"] != float64(1) || l["latency_ms"] == nil {
			t.Errorf("%s line %v: want level %s, user_id, message_type, transport, attempt 1 and latency_ms", want.msg, l, want.level)
		}
	}
	for _, secret := range []string{"5511987654321", "s3cret", "Transações", "Transactions"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}
