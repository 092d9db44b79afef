package console_test

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// verdictState is what the webhooks recorded: the Cloud API number's tier,
// flag and source, and the template goodbye_v1's status.
func verdictState(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	health, status := "no health", cmp.Or(fixture.TemplateStatusOf(t, pool, "goodbye_v1"), "no status")
	if h := fixture.NumberHealthOf(t, pool, "whatsapp"); h != nil {
		health = orDash(h.MessagingLimitTier) + " " + strconv.FormatBool(h.Flagged) + " " + h.Source
	}
	return health + " / " + status
}

// Meta's phone_number_quality_update and message_template_status_update
// on the console's webhook path: unsigned or wrongly signed, nothing
// changes; signed, the tier, the flag and the template's status are
// recorded in the order Meta triggered them; odd values (a number where
// Meta sends a string, an event or a template name not in Meta's form, an
// unknown tier, a time that is no Unix time) are skipped and acknowledged,
// and spoil nothing else in the body.
func TestWhatsAppWebhookRecordsMetasVerdict(t *testing.T) {
	t.Parallel()
	srv, pool, _ := whatsappConsole(t)
	now := time.Now().Truncate(time.Second)
	post := func(body []byte, sig string) int { return postMeta(t, srv.URL, body, sig) }
	signed := func(body []byte) int { return post(body, metafake.Sign(metaSecret, body)) }

	paused := metafake.TemplateStatus("goodbye_v1", "PAUSED", now.Add(-10*time.Minute))
	upgrade := metafake.QualityUpdate("UPGRADE", "TIER_10K", now.Add(-10*time.Minute))
	for name, c := range map[string]struct {
		body []byte
		sig  string
		want int
	}{
		"template, unsigned":          {paused, "", http.StatusUnauthorized},
		"template, another secret":    {paused, metafake.Sign("not-the-secret", paused), http.StatusForbidden},
		"quality, unsigned":           {upgrade, "", http.StatusUnauthorized},
		"quality, another secret":     {upgrade, metafake.Sign("not-the-secret", upgrade), http.StatusForbidden},
		"quality, signature not hex":  {upgrade, "sha256=zz", http.StatusForbidden},
		"template, the body changed":  {append([]byte(" "), paused...), metafake.Sign(metaSecret, paused), http.StatusForbidden},
		"quality, a signed other one": {metafake.QualityUpdate("DOWNGRADE", "TIER_250", now), metafake.Sign(metaSecret, upgrade), http.StatusForbidden},
	} {
		if got := post(c.body, c.sig); got != c.want {
			t.Errorf("%s: %d, want %d", name, got, c.want)
		}
	}
	if got := verdictState(t, pool); got != "no health / no status" {
		t.Fatalf("after unsigned and forged webhooks: %q, want nothing recorded", got)
	}

	// Odd values, signed: acknowledged (Meta would resend them for days),
	// nothing recorded.
	for name, body := range map[string][]byte{
		"event a number":           metafake.Account("message_template_status_update", now, `{"event":42,"message_template_name":"goodbye_v1"}`),
		"event not Meta's form":    metafake.Account("message_template_status_update", now, `{"event":"<script>alert(1)</script>","message_template_name":"goodbye_v1"}`),
		"no template name":         metafake.Account("message_template_status_update", now, `{"event":"PAUSED"}`),
		"template name not Meta's": metafake.Account("message_template_status_update", now, `{"event":"PAUSED","message_template_name":"Goodbye V1; DROP TABLE"}`),
		"value not an object":      metafake.Account("message_template_status_update", now, `"PAUSED"`),
		"value null":               metafake.Account("phone_number_quality_update", now, `null`),
		"unknown tier":             metafake.QualityUpdate("UPGRADE", "TIER_A_LOT", now),
		"tier a number":            metafake.Account("phone_number_quality_update", now, `{"event":"UPGRADE","current_limit":10000}`),
		"time not Unix seconds":    []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","time":"yesterday","changes":[{"field":"message_template_status_update","value":{"event":"PAUSED","message_template_name":"goodbye_v1"}}]}]}`),
		"time negative":            []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","time":-5,"changes":[{"field":"phone_number_quality_update","value":{"event":"FLAGGED"}}]}]}`),
		"an unknown field":         metafake.Account("message_template_quality_update", now, `{"new_quality_score":"RED","message_template_name":"goodbye_v1"}`),
	} {
		if got := signed(body); got != http.StatusOK {
			t.Errorf("%s: %d, want 200 (acknowledged)", name, got)
		}
	}
	if got := verdictState(t, pool); got != "no health / no status" {
		t.Fatalf("after odd values: %q, want nothing recorded", got)
	}

	// An odd verdict beside a receipt spoils only itself.
	mixed := []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","time":1,"changes":[
		{"field":"phone_number_quality_update","value":{"event":["FLAGGED"]}},
		{"field":"messages","value":{"statuses":[` + metafake.Status("wamid.OURS", "delivered", now.Add(-time.Minute), "") + `]}}]}]}`)
	if got := signed(mixed); got != http.StatusOK {
		t.Fatalf("an odd verdict beside a receipt: %d, want 200", got)
	}
	if delivered := fixture.QueueRowByProvider(t, pool, "wamid.OURS").DeliveredAt != nil; !delivered {
		t.Error("the receipt beside an odd verdict was not applied")
	}

	// Signed: recorded; then in Meta's order, whatever order they come in.
	steps := []struct {
		name string
		body []byte
		want string
	}{
		{"PAUSED and UPGRADE", nil, "TIER_10K false webhook / PAUSED"},
		{"an older REINSTATED (reordered)", metafake.TemplateStatus("goodbye_v1", "REINSTATED", now.Add(-20*time.Minute)), "TIER_10K false webhook / PAUSED"},
		{"an older DOWNGRADE (reordered)", metafake.QualityUpdate("DOWNGRADE", "TIER_250", now.Add(-20*time.Minute)), "TIER_10K false webhook / PAUSED"},
		{"FLAGGED on the template leaves it paused", metafake.TemplateStatus("goodbye_v1", "FLAGGED", now.Add(-9*time.Minute)), "TIER_10K false webhook / PAUSED"},
		{"an event Meta may add leaves it paused", metafake.TemplateStatus("goodbye_v1", "SOMETHING_NEW", now.Add(-8*time.Minute)), "TIER_10K false webhook / PAUSED"},
		{"DISABLED", metafake.TemplateStatus("goodbye_v1", "DISABLED", now.Add(-7*time.Minute)), "TIER_10K false webhook / DISABLED"},
		{"the number FLAGGED, the tier kept", metafake.Account("phone_number_quality_update", now.Add(-7*time.Minute), `{"event":"FLAGGED"}`), "TIER_10K true webhook / DISABLED"},
		{"an unknown event with a tier: the tier", metafake.QualityUpdate("TIER_REVIEW", "TIER_2K", now.Add(-6*time.Minute)), "TIER_2K true webhook / DISABLED"},
		{"the number UNFLAGGED", metafake.QualityUpdate("UNFLAGGED", "TIER_2K", now.Add(-5*time.Minute)), "TIER_2K false webhook / DISABLED"},
		{"only the retired current_limit", metafake.Account("phone_number_quality_update", now.Add(-4*time.Minute), `{"event":"UPGRADE","current_limit":"TIER_100K"}`), "TIER_100K false webhook / DISABLED"},
		{"REINSTATED", metafake.TemplateStatus("goodbye_v1", "REINSTATED", now.Add(-3*time.Minute)), "TIER_100K false webhook / REINSTATED"},
		{"a time in the future counts as now", metafake.TemplateStatus("goodbye_v1", "PAUSED", now.Add(24*time.Hour)), "TIER_100K false webhook / PAUSED"},
		// In the future too, so it counts as the later now: now+1s (the
		// test's clock) was older than the step above's now whenever the
		// steps took more than a second, as under the race detector.
		{"APPROVED (unpaused)", metafake.TemplateStatus("goodbye_v1", "APPROVED", now.Add(48*time.Hour)), "TIER_100K false webhook / APPROVED"},
	}
	for _, s := range steps {
		bodies := [][]byte{s.body}
		if s.body == nil {
			bodies = [][]byte{paused, upgrade, paused} // with a repeat
		}
		for _, b := range bodies {
			if got := signed(b); got != http.StatusOK {
				t.Fatalf("%s: %d, want 200", s.name, got)
			}
		}
		if got := verdictState(t, pool); got != s.want {
			t.Errorf("%s: %q, want %q", s.name, got, s.want)
		}
	}
}

// What the webhooks record is what the next queue-process run on the
// Cloud API reads: a goodbye whose template Meta paused waits; once Meta
// approves it again it is due at once (no hour's wait) and the next run
// sends it; a tier the webhook announced is the run's --daily-limit auto
// while the Graph API does not answer, and a number the webhook flagged
// holds the marketing kinds.
func TestMetasWebhooksReachTheNextRun(t *testing.T) {
	t.Parallel()
	srv, pool, _ := whatsappConsole(t)
	g := metafake.NewGraph(t)
	lang := map[string]string{"pt-BR": "pt_BR", "en": "en_US"}
	tr, err := transport.NewWhatsApp(transport.WhatsAppConfig{BaseURL: g.Server.URL, PhoneNumberID: g.PhoneNumberID,
		AccessToken: "tok", Templates: map[string]transport.WhatsAppTemplate{
			"engagement.goodbye.self_select":       {Name: "goodbye_v1", Language: lang},
			"engagement.weekly_review.celebration": {Name: "weekly_review_v1", Language: lang},
		}})
	if err != nil {
		t.Fatal(err)
	}
	run := func() delivery.ProcessSummary {
		t.Helper()
		p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{Transport: tr, SendInterval: -1, DailyLimitAuto: true,
			Logger: zerolog.New(zerolog.NewTestWriter(t))})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := p.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	signed := func(body []byte) {
		t.Helper()
		if got := postMeta(t, srv.URL, body, metafake.Sign(metaSecret, body)); got != http.StatusOK {
			t.Fatalf("a signed webhook: %d, want 200", got)
		}
	}
	now := time.Now()
	user := fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: now.Add(-15 * 24 * time.Hour), GoodbyeSentAt: &now})
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.self_select",
		JID: "5511988887777@s.whatsapp.net", ScheduledFor: time.Now().Add(-time.Minute), Key: user + ":goodbye"})

	signed(metafake.TemplateStatus("goodbye_v1", "PAUSED", now.Add(-time.Minute)))
	if sum := run(); sum.DeferReasons["template_paused"] != 1 || g.MarketingSent()["goodbye_v1"] != 0 {
		t.Fatalf("the template paused: deferred %v, sent %v; want the goodbye held", sum.DeferReasons, g.MarketingSent())
	}
	signed(metafake.TemplateStatus("goodbye_v1", "APPROVED", now))
	if sum := run(); sum.Sent != 1 || g.MarketingSent()["goodbye_v1"] != 1 {
		t.Fatalf("once Meta approved it again: sent %d (%v); want the goodbye sent at the next run", sum.Sent, g.MarketingSent())
	}

	// The Graph API down: the run keeps what the webhook said.
	g.Answer(http.StatusInternalServerError, `{"error":{"message":"An unknown error occurred","code":1}}`, 0)
	signed(metafake.QualityUpdate("UPGRADE", "TIER_10K", time.Now()))
	if sum := run(); sum.Budget == nil || sum.Budget.Limit != 10000 {
		t.Errorf("after an UPGRADE to TIER_10K with the Graph API down: budget %+v, want 10000", sum.Budget)
	}
	weekly := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-time.Hour)})
	fixture.Queue(t, pool, fixture.Message{User: weekly, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
		Params: `{"count":"2"}`, JID: "5511977776666@s.whatsapp.net", ScheduledFor: time.Now().Add(-time.Minute), Key: weekly + ":weekly"})
	signed(metafake.Account("phone_number_quality_update", time.Now(), `{"event":"FLAGGED"}`))
	if sum := run(); sum.DeferReasons["quality"] != 1 || sum.Number == nil || !sum.Number.Flagged {
		t.Errorf("the number flagged: deferred %v, number %+v; want the weekly review held on quality", sum.DeferReasons, sum.Number)
	}
	signed(metafake.QualityUpdate("UNFLAGGED", "TIER_10K", time.Now().Add(time.Second)))
	if sum := run(); sum.Sent != 1 || g.MarketingSent()["weekly_review_v1"] != 1 {
		t.Errorf("once UNFLAGGED: sent %d (%v); want the weekly review sent at the next run", sum.Sent, g.MarketingSent())
	}
}
