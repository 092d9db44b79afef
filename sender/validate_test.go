package sender_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender"
)

// Issue 56, finding 7: Message.Validate, each rule at its edge, and
// Enqueue refusing, before it writes, a message a Go caller built by hand
// (0001-01-01 is the zero time there: "none", so it is refused in
// Request.Message, where it was spelt).
func TestMessageValidate(t *testing.T) {
	t.Parallel()
	user := fixture.NewID()
	ok := sender.Message{UserID: user, Type: "support_followup", Key: "engagement.weekly_review.celebration",
		Params: map[string]string{"count": "3"}, DestinationJID: "5511987654321@s.whatsapp.net", ScheduledFor: time.Now()}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a good message: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*sender.Message)
		field string // "" when valid
	}{
		{"64-character type", func(m *sender.Message) { m.Type = "t" + strings.Repeat("x", 63) }, ""},
		{"65-character type", func(m *sender.Message) { m.Type = "t" + strings.Repeat("x", 64) }, "type"},
		{"type starting with a digit", func(m *sender.Message) { m.Type = "1promo" }, "type"},
		{"type with a slash", func(m *sender.Message) { m.Type = "promo/x" }, "type"},
		{"no key", func(m *sender.Message) { m.Key = "" }, ""},
		{"128-character key", func(m *sender.Message) { m.Key = strings.Repeat("k", 128) }, ""},
		{"129-character key", func(m *sender.Message) { m.Key = strings.Repeat("k", 129) }, "key"},
		{"32 params", func(m *sender.Message) { m.Params = params(32, "v") }, ""},
		{"33 params", func(m *sender.Message) { m.Params = params(33, "v") }, "params"},
		{"1,024-character value", func(m *sender.Message) { m.Params = params(1, strings.Repeat("é", 1024)) }, ""},
		{"1,025-character value", func(m *sender.Message) { m.Params = params(1, strings.Repeat("é", 1025)) }, "params"},
		{"value not UTF-8", func(m *sender.Message) { m.Params = params(1, "\xff") }, "params"},
		{"lid", func(m *sender.Message) { m.DestinationJID = "123456789012345@lid" }, ""},
		{"group to an individual", func(m *sender.Message) { m.Destination, m.DestinationJID = "individual", "120363123@g.us" }, "jid"},
		{"16-digit number", func(m *sender.Message) { m.DestinationJID = "5511987654321000@s.whatsapp.net" }, "jid"},
		{"leading 0", func(m *sender.Message) { m.DestinationJID = "05511987654321@s.whatsapp.net" }, "jid"},
		{"upper case server", func(m *sender.Message) { m.DestinationJID = "5511987654321@S.WHATSAPP.NET" }, "jid"},
		{"2000-01-01", func(m *sender.Message) { m.ScheduledFor = sender.EarliestInstant }, ""},
		{"just before 2000", func(m *sender.Message) { m.ScheduledFor = sender.EarliestInstant.Add(-time.Second) }, "scheduled_for"},
		{"399 days ahead", func(m *sender.Message) { m.ReplayUntil = time.Now().Add(399 * 24 * time.Hour) }, ""},
		{"401 days ahead", func(m *sender.Message) { m.ReplayUntil = time.Now().Add(401 * 24 * time.Hour) }, "replay_until"},
		{"not a UUID", func(m *sender.Message) { m.UserID = "nope" }, "user_id"},
	} {
		m := ok
		tc.edit(&m)
		err := m.Validate()
		var fe *sender.FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.name, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sender.ErrInvalidRequest)):
			t.Errorf("%s: %v, want a FieldError on %s", tc.name, err, tc.field)
		case err != nil && strings.Contains(err.Error(), "98765"):
			t.Errorf("%s: %v quotes the JID", tc.name, err)
		}
	}

	tx := pgtest.NewTx(t)
	bad := ok
	bad.UserID = fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now()})
	bad.DestinationJID = "not a jid"
	if _, err := sender.Enqueue(context.Background(), tx, bad); !errors.Is(err, sender.ErrInvalidRequest) {
		t.Errorf("Enqueue of a garbage JID: %v, want ErrInvalidRequest", err)
	}
	if n := fixture.CountMessages(t, tx, fixture.Messages{}); n != 0 {
		t.Errorf("%d messages written, want none", n)
	}
}

func params(n int, value string) map[string]string {
	p := map[string]string{}
	for i := range n {
		p["p"+strings.Repeat("x", i)] = value
	}
	return p
}
