package idempotency_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/engagement-scheduler/engagement/idempotency"
	"github.com/engagement-scheduler/engagement/internal/testkit/redistest"
)

// Delivery is what queue-process POSTs to the bot's webhook; IdempotencyKey
// comes from the Idempotency-Key header.
type Delivery struct {
	IdempotencyKey string
	DestinationJID string
	Text           string
}

// Sent is what the bot answers for a delivery; a resend gets the same answer.
type Sent struct {
	WhatsAppMessageID string `json:"wamid"`
}

// The bot drops a second delivery with an Idempotency-Key it has seen: the
// message goes out once, and the resend after a crash (or a retry after a
// timeout) gets the first answer back. Redis fails closed here: if it is
// down, the bot answers 5xx and queue-process retries later, rather than
// risking a message sent twice.
func ExampleWrap() {
	ctx := context.Background()
	store, err := idempotency.ParseStore(redisURL(), nil, idempotency.Options{
		Prefix:   examplePrefix, // "bot:webhook:" in the bot
		FailMode: idempotency.FailClosed,
	})
	if err != nil {
		panic(err)
	}
	defer store.(io.Closer).Close()

	sends := 0
	deliver := idempotency.Wrap(store,
		func(d Delivery) string { return d.IdempotencyKey },
		48*time.Hour, // longer than queue-process keeps retrying
		func(ctx context.Context, d Delivery) (Sent, error) {
			sends++ // here the bot sends d.Text to d.DestinationJID
			return Sent{WhatsAppMessageID: "wamid.1"}, nil
		})

	d := Delivery{IdempotencyKey: "u1:goodbye_sent:2026-11-21", DestinationJID: "5511999999999@s.whatsapp.net", Text: "Tchau!"}
	for range 2 {
		sent, duplicate, err := deliver(ctx, d)
		switch {
		case err != nil: // ErrInProgress, or the store is down: answer 5xx, the sender retries
			fmt.Println("retry later:", err)
		case duplicate:
			fmt.Println("duplicate, already sent as", sent.WhatsAppMessageID)
		default:
			fmt.Println("sent as", sent.WhatsAppMessageID)
		}
	}
	fmt.Println("messages sent:", sends)

	store.(idempotency.Forgetter).Forget(ctx, d.IdempotencyKey) // the example's cleanup
	// Output:
	// sent as wamid.1
	// duplicate, already sent as wamid.1
	// messages sent: 1
}

// examplePrefix keeps the example's keys apart from every other run's.
var examplePrefix = func() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "example:" + hex.EncodeToString(b) + ":bot:webhook:"
}()

// redisURL is the test server's (see internal/testkit/redistest); the bot reads its
// own from its configuration, e.g. redis://redis.railway.internal:6379/0.
func redisURL() string {
	u, err := redistest.ServerURL(context.Background())
	if err != nil {
		panic(err)
	}
	return u
}
