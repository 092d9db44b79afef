package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 55, finding 3 (../shared/CONTRACT.md, round seven, "One entry, one
// verdict"): in a signed body from Meta, one statuses[] or
// user_preferences[] entry the scheduler cannot use (a field of the wrong
// type, a NUL, an unknown status) is skipped, logged without personal data
// and counted; the entries beside it are applied, and the answer is 200,
// every time Meta resends it. Before, such an entry made the console drop
// every status of its change (and answer 200), or, with a NUL, answer 503
// on every retry, so that Meta resent it for days and the statuses after
// it were never applied.
//
// Each body is Meta's status webhook
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/status/:
// id a string, status a string, timestamp a string of Unix seconds,
// errors[] objects whose code is an integer, pricing.billable a boolean)
// carrying three statuses: a good one, the odd one, a good one; the odd
// one is a real-shaped status with one field changed.
func TestOneOddWebhookEntrySpoilsOnlyItself(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	ts := `"timestamp":"` + strconv.FormatInt(at.Unix(), 10) + `"`
	odd := map[string]func(id string) string{
		"a timestamp of the wrong type": func(id string) string {
			return strings.Replace(metafake.Status(id, "delivered", at, ""), ts, `"timestamp":true`, 1)
		},
		"a timestamp that is no number": func(id string) string {
			return strings.Replace(metafake.Status(id, "delivered", at, ""), ts, `"timestamp":"yesterday"`, 1)
		},
		"an error code of the wrong type": func(id string) string {
			return metafake.Status(id, "failed", at, `{"value":131026}`)
		},
		"an error code that is no number": func(id string) string {
			return metafake.Status(id, "failed", at, `"undeliverable"`)
		},
		"errors that are no list": func(id string) string {
			s := metafake.Status(id, "failed", at, "")
			return s[:len(s)-1] + `,"errors":{"code":131026}}`
		},
		"billable of the wrong type": func(id string) string {
			return strings.Replace(metafake.Status(id, "delivered", at, ""), `"billable":true`, `"billable":"yes"`, 1)
		},
		"an id of the wrong type": func(id string) string {
			return strings.Replace(metafake.Status(id, "delivered", at, ""), `"id":"`+id+`"`, `"id":131026`, 1)
		},
		"a status of the wrong type": func(id string) string {
			return strings.Replace(metafake.Status(id, "delivered", at, ""), `"status":"delivered"`, `"status":2`, 1)
		},
		"an unknown status": func(id string) string { return metafake.Status(id, "deleted", at, "") },
		"a NUL in the id": func(id string) string {
			return strings.Replace(metafake.Status(id, "delivered", at, ""), `"id":"`+id+`"`, `"id":"`+id+`\u0000"`, 1)
		},
		"a NUL in the status": func(id string) string {
			return strings.Replace(metafake.Status(id, "delivered", at, ""), `"status":"delivered"`, `"status":"delivered\u0000"`, 1)
		},
		"a NUL in the pricing's category": func(id string) string {
			return strings.Replace(metafake.Status(id, "delivered", at, ""), `"category":"marketing"`, `"category":"marketing\u0000"`, 1)
		},
	}
	// Three messages the scheduler sent per case: the neighbours and the
	// odd entry's own.
	n := 0
	for name := range odd {
		for _, which := range []string{"before", "odd", "after"} {
			n++
			sent := time.Now().Add(-3 * time.Hour)
			fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.default",
				JID: "5511999990000@s.whatsapp.net", ScheduledFor: sent, Key: fmt.Sprintf("k%d", n), Status: "sent", SentAt: sent,
				ProviderID: wamid(name, which)})
		}
	}
	c := startConsole(t, cmdtest.Build(t, "./cmd/engagement-console"), url,
		"--whatsapp-app-secret", appSecret, "--whatsapp-verify-token", verifyToken)
	post := func(body []byte) int {
		t.Helper()
		if !json.Valid(body) {
			t.Fatalf("not JSON: %s", body)
		}
		req, _ := http.NewRequest(http.MethodPost, c.base+"/webhooks/whatsapp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Hub-Signature-256", metafake.Sign(appSecret, body))
		res, err := c.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	row := func(id string) string {
		t.Helper()
		m := fixture.QueueRowByProvider(t, pool, id)
		msg := "-"
		if m.ErrorMessage != nil {
			msg = *m.ErrorMessage
		}
		s := m.Status + " " + strconv.FormatBool(m.DeliveredAt != nil) + " " + msg
		return s
	}
	bad := 0
	for name, lie := range odd {
		body := metafake.Statuses(metafake.Status(wamid(name, "before"), "delivered", at, ""),
			lie(wamid(name, "odd")), metafake.Status(wamid(name, "after"), "delivered", at, ""))
		for try := range 2 { // Meta's retry gets the same answer
			bad++
			if got := post(body); got != http.StatusOK {
				t.Errorf("%s (try %d): answered %d, want 200", name, try+1, got)
			}
		}
		for _, which := range []string{"before", "after"} {
			if got := row(wamid(name, which)); got != "sent true -" {
				t.Errorf("%s: the status %s it: %q, want delivered (sent true -)", name, which, got)
			}
		}
		if got := row(wamid(name, "odd")); got != "sent false -" {
			t.Errorf("%s: the odd status's own message: %q, want it untouched", name, got)
		}
	}

	// user_preferences: Maria's stop between entries the scheduler cannot
	// use (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/user_preferences:
	// wa_id a string, value a string, timestamp a number of Unix seconds).
	maria, joao := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()}),
		fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	fixture.SetJID(t, pool, maria, fixture.Ptr("5511988887777@s.whatsapp.net"))
	fixture.SetJID(t, pool, joao, fixture.Ptr("5511977776666@s.whatsapp.net"))
	stopJoao := metafake.PreferenceEntry("5511977776666", "stop", at)
	prefs := metafake.Preferences("5511988887777",
		strings.Replace(stopJoao, `"wa_id":"5511977776666"`, `"wa_id":5511977776666`, 1),
		strings.Replace(stopJoao, `"wa_id":"5511977776666"`, `"wa_id":"5511977776666\u0000"`, 1),
		strings.Replace(stopJoao, `"value":"stop"`, `"value":true`, 1),
		strings.Replace(stopJoao, `"value":"stop"`, `"value":"st\u0000op"`, 1),
		strings.Replace(stopJoao, `"timestamp":`+strconv.FormatInt(at.Unix(), 10), `"timestamp":"an hour ago"`, 1),
		metafake.PreferenceEntry("5511988887777", "stop", at),
		strings.Replace(stopJoao, `"category":"marketing_messages"`, `"category":["marketing_messages"]`, 1),
	)
	for try := range 2 {
		bad += 6
		if got := post(prefs); got != http.StatusOK {
			t.Errorf("user_preferences with odd entries (try %d): answered %d, want 200", try+1, got)
		}
	}
	optedOut := []bool{fixture.ProfileOf(t, pool, maria).ReengagementOptOut, fixture.ProfileOf(t, pool, joao).ReengagementOptOut}
	if len(optedOut) != 2 || !optedOut[0] || optedOut[1] {
		t.Errorf("opted out (maria, joão): %v, want Maria's stop applied and joão untouched by the odd entries", optedOut)
	}

	// Logged without personal data, and counted.
	// The console logs a request's lines as it answers it; they reach the
	// test through a pipe a moment later: the last answer's line first.
	logs := c.waitLogged(t, fmt.Sprintf(`"skipped_total":%d,`, bad))
	for _, personal := range []string{"5511", "wamid."} {
		if strings.Contains(logs, personal) {
			t.Errorf("the console's log carries %q (a number, or a wamid, which encodes one):\n%s", personal, logs)
		}
	}
	skipped, total := 0, 0
	for _, line := range cmdtest.Lines(logs) {
		var l struct {
			Message      string `json:"message"`
			Reason       string `json:"reason"`
			SkippedTotal int    `json:"skipped_total"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch l.Message {
		case "whatsapp webhook: an entry the scheduler cannot use; skipped":
			skipped++
			if l.Reason == "" {
				t.Errorf("a skipped entry's line says no reason: %s", line)
			}
		case "whatsapp webhook applied":
			total = max(total, l.SkippedTotal)
		}
	}
	if skipped != bad || total != bad {
		t.Errorf("%d lines of a skipped entry, skipped_total %d; want %d each:\n%s", skipped, total, bad, logs)
	}
}

// wamid is the provider id of the test's message which of case name: a
// Cloud API id's shape (wamid.<base64>), one per case.
func wamid(name, which string) string {
	return "wamid.HBgL" + strings.NewReplacer(" ", "_", "'", "").Replace(name) + "." + which
}

// Issue 55, finding 4, on the console's side: Meta's
// phone_number_quality_update webhook
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/phone_number_quality_update/:
// max_daily_conversations_per_business and current_limit, strings such as
// TIER_250) never raises the messaging limit the next run's --daily-limit
// auto follows without naming a tier: TIER_NOT_SET, a tier of the wrong
// type or one Meta never named keeps TIER_50 (TIER_NOT_SET used to replace
// it, and the run then fell back to 250).
func TestAQualityUpdateNeverRaisesTheLimitWithoutNamingATier(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	c := startConsole(t, cmdtest.Build(t, "./cmd/engagement-console"), url,
		"--whatsapp-app-secret", appSecret, "--whatsapp-verify-token", verifyToken)
	post := func(body []byte) { postSigned(t, c, body, "a signed quality update") }
	tier := func() string {
		t.Helper()
		h := fixture.NumberHealthOf(t, pool, "whatsapp")
		if h == nil {
			t.Fatal("no health recorded of the whatsapp number")
		}
		if h.MessagingLimitTier == nil {
			return "-"
		}
		return *h.MessagingLimitTier
	}
	at := time.Now().Add(-time.Hour)
	post(metafake.QualityUpdate("DOWNGRADE", "TIER_50", at))
	if got := tier(); got != "TIER_50" {
		t.Fatalf("after a DOWNGRADE to TIER_50: %q", got)
	}
	for i, value := range []string{
		`{"display_phone_number":"15550783881","event":"ONBOARDING","current_limit":"TIER_NOT_SET","max_daily_conversations_per_business":"TIER_NOT_SET"}`,
		`{"display_phone_number":"15550783881","event":"UPGRADE","max_daily_conversations_per_business":100000}`,
		`{"display_phone_number":"15550783881","event":"UPGRADE","current_limit":["TIER_100K"],"max_daily_conversations_per_business":{"tier":"TIER_100K"}}`,
		`{"display_phone_number":"15550783881","event":"UPGRADE","current_limit":"TIER_A_LOT","max_daily_conversations_per_business":"TIER_A_LOT"}`,
	} {
		post(metafake.Account("phone_number_quality_update", at.Add(time.Duration(i+1)*time.Minute), value))
		if got := tier(); got != "TIER_50" {
			t.Errorf("after %s: the tier is %q, want TIER_50 kept", value, got)
		}
	}
}

// Issue 57: Meta's business_capability_update webhook
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/business_capability_update/)
// carries the business portfolio's messaging limit as an integer,
// max_daily_conversations_per_business (250, 2000, 10000, 100000; -1
// unlimited). The console records it as the tier the next run's
// --daily-limit auto follows, lower or higher, in the order Meta triggered
// them; a value of another type, a number Meta does not list, or a change
// without it keeps the tier known. Before, the field was ignored.
func TestABusinessCapabilityUpdateSetsThePortfolioLimit(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	c := startConsole(t, cmdtest.Build(t, "./cmd/engagement-console"), url,
		"--whatsapp-app-secret", appSecret, "--whatsapp-verify-token", verifyToken)
	at, changes := time.Now().Add(-time.Hour), 0
	post := func(value string) string {
		t.Helper()
		changes++
		postSigned(t, c, metafake.Account("business_capability_update", at.Add(time.Duration(changes)*time.Minute), value),
			"a signed business_capability_update")
		if h := fixture.NumberHealthOf(t, pool, "whatsapp"); h != nil && h.MessagingLimitTier != nil {
			return *h.MessagingLimitTier
		}
		return "-"
	}
	if got := post(`{"max_daily_conversation_per_phone":2000,"max_daily_conversations_per_business":2000,"max_phone_numbers_per_business":2,"max_phone_numbers_per_waba":2}`); got != "TIER_2K" {
		t.Fatalf("after 2000: the tier is %q, want TIER_2K", got)
	}
	for _, value := range []string{
		`{"max_daily_conversations_per_business":"100000"}`,
		`{"max_daily_conversations_per_business":100000.5}`,
		`{"max_daily_conversations_per_business":123456}`,
		`{"max_daily_conversations_per_business":"TIER_100K"}`,
		`{"max_daily_conversations_per_business":null}`,
		`{"max_daily_conversation_per_phone":100000,"max_phone_numbers_per_business":20}`,
	} {
		if got := post(value); got != "TIER_2K" {
			t.Errorf("after %s: the tier is %q, want TIER_2K kept", value, got)
		}
	}
	if got := post(`{"max_daily_conversations_per_business":250}`); got != "TIER_250" {
		t.Errorf("after 250: the tier is %q, want TIER_250", got)
	}
	if got := post(`{"max_daily_conversations_per_business":-1}`); got != "TIER_UNLIMITED" {
		t.Errorf("after -1: the tier is %q, want TIER_UNLIMITED", got)
	}
}
