package console_test

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/sender"
)

// Issue 56, finding 7: POST /api/messages took a garbage JID, a
// 10,000-character type and scheduled_for 0001-01-01 (silently now). Each
// is 400 naming the field (never quoting the JID), nothing written, no
// audit row; a JID WhatsApp accepts still queues.
func TestEnqueueAPIRefusesWhatCannotBeSent(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	srv, logs := serveLogged(t, pool)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	body := func(fields string) string {
		return `{"user_id":"` + user + `","key":"engagement.weekly_review.celebration","params":{"count":"3"},` + fields + `}`
	}
	for _, tc := range []struct{ name, fields, field string }{
		{"garbage JID", `"type":"weekly_review","jid":"call me 98765"`, "jid"},
		{"a JID with a device", `"type":"weekly_review","jid":"5511987654321:7@s.whatsapp.net"`, "jid"},
		{"a user's JID to a group", `"type":"weekly_review","destination":"group","jid":"5511987654321@s.whatsapp.net"`, "jid"},
		{"a 10,000-character type", `"type":"` + strings.Repeat("x", 10000) + `"`, "type"},
		{"a type with a NUL", `"type":"promo\u0000"`, "type"},
		{"a 200-character key", `"type":"promo","key":"` + strings.Repeat("k", 200) + `"`, "key"},
		{"a 2,000-character param", `"type":"promo","params":{"count":"` + strings.Repeat("3", 2000) + `"}`, "params"},
		{"scheduled_for 0001-01-01", `"type":"promo","scheduled_for":"0001-01-01T00:00:00Z"`, "scheduled_for"},
		{"scheduled_for in 3000", `"type":"promo","scheduled_for":"3000-01-01T00:00:00Z"`, "scheduled_for"},
		{"period_start 0001-01-01", `"type":"promo","period_start":"0001-01-01T00:00:00Z"`, "period_start"},
	} {
		resp, out := apiPost(t, srv, operator, operatorPassword, "application/json", body(tc.fields))
		var e console.APIError
		decode(t, out, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Field != tc.field || !strings.HasPrefix(e.Error, tc.field+":") || len(e.Error) > 400 {
			t.Errorf("%s: %d %.300s; want 400 naming %s in a short error", tc.name, resp.StatusCode, out, tc.field)
		}
		if strings.Contains(out, "98765") {
			t.Errorf("%s: the answer quotes the JID: %s", tc.name, out)
		}
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{}) + len(fixture.ConsoleAudit(t, pool)); n != 0 {
		t.Errorf("%d messages and audit rows written by refused requests, want none", n)
	}
	if strings.Contains(logs.String(), "98765") {
		t.Errorf("the console's log quotes a JID: %s", logs.String())
	}
	for _, fields := range []string{
		`"type":"support_followup","jid":"5511987654321@s.whatsapp.net"`,
		`"type":"custom_news","jid":"123456789012345@lid","scheduled_for":"` + time.Now().Add(48*time.Hour).UTC().Format(time.RFC3339) + `"`,
		`"type":"promo","destination":"group","jid":"120363123456789012@g.us"`,
	} {
		if resp, out := apiPost(t, srv, operator, operatorPassword, "application/json", body(fields)); resp.StatusCode != http.StatusCreated {
			t.Errorf("%s: %d %s, want 201", fields, resp.StatusCode, out)
		}
	}
}

// The API's schema states the same rules for type, key and jid as
// sender.Message.Validate applies: each example is accepted by both or
// refused by both.
func TestOpenAPIPatternsMatchValidate(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct{ Pattern string }
			}
		}
	}
	decode(t, string(raw), &doc)
	props := doc.Components.Schemas["EnqueueRequest"].Properties
	ok := sender.Message{UserID: fixture.NewID(), Type: "promo"}
	for field, examples := range map[string][]string{
		"type": {"promo", "support_followup", "custom.news-2", "Promo", "1promo", "pro mo", "promo\n", strings.Repeat("x", 64)},
		"key":  {"engagement.weekly_review.celebration", "K-1_2.x", ".lead", "a b", "a/b"},
		"jid": {"5511987654321@s.whatsapp.net", "123456789012345@lid", "120363123456789012@g.us", "5511987654321-1612345678@g.us",
			"5511987654321@c.us", "05511987654321@s.whatsapp.net", "5511987654321:2@s.whatsapp.net", "x@g.us", "status@broadcast"},
	} {
		re, err := regexp.Compile(props[field].Pattern)
		if props[field].Pattern == "" || err != nil {
			t.Fatalf("schema EnqueueRequest.%s: pattern %q (%v)", field, props[field].Pattern, err)
		}
		for _, ex := range examples {
			m := ok
			switch field {
			case "type":
				m.Type = ex
			case "key":
				m.Key = ex
			case "jid":
				m.DestinationJID = ex
			}
			schema := re.MatchString(ex) && (field != "type" || len(ex) <= 64)
			if valid := m.Validate() == nil; valid != schema {
				t.Errorf("%s %q: Validate accepts it %v, the schema's pattern %v", field, ex, valid, schema)
			}
		}
	}
}
