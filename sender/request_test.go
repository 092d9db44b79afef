package sender_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/sender"
)

// TestRequestMessage: the checks engagementctl enqueue and the console's
// POST /api/messages share, each refusal naming its field.
func TestRequestMessage(t *testing.T) {
	t.Parallel()
	const user = "7C9E6679-7425-40DE-944B-E07FC1F90AE7"
	ok := sender.Request{UserID: " " + user + " ", Type: "weekly_review", Key: "engagement.weekly_review.celebration",
		Params: json.RawMessage(`{"count":"3"}`), Destination: "group", JID: "120363@g.us",
		ScheduledFor: "2026-11-23T09:00:00-03:00", IdempotencyKey: " week-48 ", PeriodStart: "2026-11-23T00:00:00Z"}
	m, err := ok.Message()
	if err != nil {
		t.Fatalf("a good request: %v", err)
	}
	want := sender.Message{UserID: strings.ToLower(user), Type: "weekly_review", Key: "engagement.weekly_review.celebration",
		Params: map[string]string{"count": "3"}, Destination: "group", DestinationJID: "120363@g.us",
		ScheduledFor: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), IdempotencyKey: "week-48",
		PeriodStart: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)}
	if m.UserID != want.UserID || m.Type != want.Type || m.Key != want.Key || m.Params["count"] != "3" || len(m.Params) != 1 ||
		m.Destination != want.Destination || m.DestinationJID != want.DestinationJID || !m.ScheduledFor.Equal(want.ScheduledFor) ||
		m.IdempotencyKey != want.IdempotencyKey || !m.PeriodStart.Equal(want.PeriodStart) || !m.ReplayUntil.IsZero() {
		t.Errorf("Message() = %+v, want %+v", m, want)
	}
	if m, err := (sender.Request{UserID: strings.ReplaceAll(user, "-", ""), Type: "reminder"}).Message(); err != nil || m.UserID != want.UserID {
		t.Errorf("a user id without its dashes: %q, %v; want %q", m.UserID, err, want.UserID)
	}
	for _, none := range []string{"", "null", "  "} {
		r := sender.Request{UserID: user, Type: "reminder", Params: json.RawMessage(none)}
		if m, err := r.Message(); err != nil || m.Params != nil {
			t.Errorf("params %q: %+v, %v; want no params", none, m.Params, err)
		}
	}

	for _, tc := range []struct {
		name  string
		edit  func(*sender.Request)
		field string
	}{
		{"user id not a UUID", func(r *sender.Request) { r.UserID = "nope" }, "user_id"},
		{"no type", func(r *sender.Request) { r.Type = " " }, "type"},
		{"destination", func(r *sender.Request) { r.Destination = "channel" }, "destination"},
		{"params not JSON", func(r *sender.Request) { r.Params = json.RawMessage(`count=3`) }, "params"},
		{"params not strings", func(r *sender.Request) { r.Params = json.RawMessage(`{"count":3}`) }, "params"},
		{"params with a NUL", func(r *sender.Request) { r.Params = json.RawMessage(`{"count":"a\u0000b"}`) }, "params"},
		{"scheduled_for", func(r *sender.Request) { r.ScheduledFor = "tomorrow" }, "scheduled_for"},
		{"period_start", func(r *sender.Request) { r.PeriodStart = "W48" }, "period_start"},
		{"replay_until", func(r *sender.Request) { r.ReplayUntil = "soon" }, "replay_until"},
		{"key with a LF", func(r *sender.Request) { r.IdempotencyKey = "week\n48" }, "idempotency_key"},
		{"key too long", func(r *sender.Request) { r.IdempotencyKey = strings.Repeat("k", 129) }, "idempotency_key"},
	} {
		r := ok
		tc.edit(&r)
		_, err := r.Message()
		var fe *sender.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sender.ErrInvalidRequest) {
			t.Errorf("%s: %v, want a FieldError on %s", tc.name, err, tc.field)
			continue
		}
		if tc.field == "idempotency_key" && (!errors.Is(err, sender.ErrInvalidKey) || strings.Contains(err.Error(), "week")) {
			t.Errorf("%s: %v, want ErrInvalidKey without the key quoted", tc.name, err)
		}
	}
}
