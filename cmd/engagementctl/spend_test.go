package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
)

// Issue 55, finding 7: the spend is what Meta bills. Three weekly reviews
// (marketing) go out through the Cloud API (queue-process against a fake
// Graph API), two through the webhook to a bot and two through the log
// transport. Meta's signed webhook, through the console, says of the Cloud
// API's: one sent then delivered, one sent (billable, as Meta's sent
// statuses say) then failed with 131026, one sent only; the bot acks its
// two as delivered (engagement_receipt). Meta bills the delivered one
// only: US$0.0625 at Brazil's marketing price; the late failure is never
// billed, the one still in transit is not billed yet, and the four that
// went through the bot's connection or the log cost Meta nothing.
// engagementctl status and funnel say so in text and in JSON, and the
// console's spend card too.
func TestStatusAndFunnelShowWhatMetaBills(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	send := func(env []string, args ...string) {
		t.Helper()
		res := cmdtest.Exec(t, queuecmd.NewCommand, env, append([]string{"--send-interval", "0", "--output", "json"}, args...)...)
		if res.Code != 0 {
			t.Fatalf("queue-process %v: exit %d: %s", args, res.Code, res.Stderr)
		}
	}

	// The Cloud API.
	graph := metafake.NewGraph(t)
	templates := filepath.Join(t.TempDir(), "templates.json")
	if err := os.WriteFile(templates, []byte(`{
		"engagement.weekly_review.celebration":{"name":"weekly_review_v1","language":{"pt-BR":"pt_BR"},"params":["count"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fixture.DueToRecipients(t, pool, 3, "cloud")
	send(cmdtest.Env("DATABASE_URL="+url, "WHATSAPP_PHONE_NUMBER_ID="+graph.PhoneNumberID, "WHATSAPP_ACCESS_TOKEN=tok",
		"WHATSAPP_TEMPLATES="+templates, "WHATSAPP_BASE_URL="+graph.Server.URL), "--transport", "whatsapp-cloud")
	if got := graph.MarketingSent()["weekly_review_v1"]; got != 3 {
		t.Fatalf("the Graph API accepted %d messages, want 3", got)
	}
	// The bot's webhook (Baileys), then the log.
	bot := webhooktest.New(t)
	fixture.DueToRecipients(t, pool, 2, "bot")
	send(cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_WEBHOOK_URL="+bot.URL), "--transport", "webhook")
	fixture.DueToRecipients(t, pool, 2, "log")
	send(cmdtest.Env("DATABASE_URL="+url), "--transport", "log")
	if got := fixture.CountMessages(t, pool, fixture.Messages{Status: "sent"}); got != 7 {
		t.Fatalf("%d messages sent, want 7", got)
	}

	// Meta's webhook, signed, through the console.
	const secret = "meta-app-secret-spend"
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users, err := console.ParseHtpasswd(strings.NewReader("ops:" + string(hash)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.New(console.Config{Pool: pool, Auth: console.Auth{Users: users},
		WhatsApp: console.WhatsAppWebhook{AppSecret: secret, VerifyToken: "token"},
		Logger:   zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	now := time.Now().Add(-time.Minute).Truncate(time.Second)
	for _, s := range [][]string{
		{"wamid.mm.weekly_review_v1.1", "sent", ""}, {"wamid.mm.weekly_review_v1.1", "delivered", ""},
		{"wamid.mm.weekly_review_v1.2", "sent", ""}, {"wamid.mm.weekly_review_v1.2", "failed", "131026"},
		{"wamid.mm.weekly_review_v1.3", "sent", ""},
	} {
		body := metafake.Statuses(metafake.Status(s[0], s[1], now, s[2]))
		req, _ := http.NewRequest(http.MethodPost, srv.URL+console.WhatsAppWebhookPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Hub-Signature-256", metafake.Sign(secret, body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("Meta's %s status: %d, want 200", s[1], res.StatusCode)
		}
	}
	// The bot acks its two as delivered.
	botIDs := fixture.CtlProviderIDs(t, pool, "bot")
	if len(botIDs) != 2 || slices.Contains(botIDs, "") {
		t.Fatalf("the bot's provider ids: %q, want two", botIDs)
	}
	for _, id := range botIDs {
		fixture.CtlReceipt(t, pool, id, "delivered", now)
	}

	env := cmdtest.Env("DATABASE_URL=" + url)
	type spend struct {
		Accepted, Delivered, Billable, Failed, Awaiting, Unpriced int64
		USD                                                       float64
		AwaitingUSD                                               float64 `json:"awaiting_usd"`
		NotMeta                                                   []struct {
			Transport           string
			Messages, Delivered int64
		} `json:"not_meta"`
	}
	check := func(cmd string, sp spend) {
		t.Helper()
		if sp.Accepted != 3 || sp.Delivered != 1 || sp.Billable != 1 || sp.Failed != 1 || sp.Awaiting != 1 || sp.Unpriced != 0 ||
			sp.USD != 0.0625 || sp.AwaitingUSD != 0.0625 {
			t.Errorf("%s: spend %+v; want 3 accepted by the Cloud API, 1 delivered and billed (US$0.0625), 1 failed, 1 awaiting (US$0.0625 if delivered)", cmd, sp)
		}
		got := map[string]int64{}
		for _, n := range sp.NotMeta {
			got[n.Transport] = n.Messages
		}
		if len(got) != 2 || got["webhook"] != 2 || got["log"] != 2 {
			t.Errorf("%s: not Meta's %+v; want webhook 2 and log 2", cmd, sp.NotMeta)
		}
	}

	res := cmdtest.Exec(t, ctl.NewCommand, env, "status", "--output", "json")
	var st struct{ Spend spend }
	if err := json.Unmarshal([]byte(res.Stdout), &st); res.Code != 0 || err != nil {
		t.Fatalf("status --output json: exit %d, %v: %s", res.Code, err, res.Stderr)
	}
	check("status", st.Spend)
	res = cmdtest.Exec(t, ctl.NewCommand, env, "funnel", "--output", "json")
	var fu struct{ Spend *spend }
	if err := json.Unmarshal([]byte(res.Stdout), &fu); res.Code != 0 || err != nil || fu.Spend == nil {
		t.Fatalf("funnel --output json: exit %d, %v, spend %v: %s", res.Code, err, fu.Spend, res.Stderr)
	}
	check("funnel", *fu.Spend)

	// The console's spend card says the same.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/queue", nil)
	req.SetBasicAuth("ops", "pw")
	page, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	for _, want := range []string{"billed by Meta", "US$0.06", "1 delivered and billed of 3 the Cloud API accepted",
		"awaiting a receipt", "never delivered: not billed", "no Meta cost", "2 through log, 2 through webhook"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the console's queue page lacks %q", want)
		}
	}

	for _, cmd := range []string{"status", "funnel"} {
		res := cmdtest.Exec(t, ctl.NewCommand, env, cmd)
		if res.Code != 0 {
			t.Fatalf("%s: exit %d: %s", cmd, res.Code, res.Stderr)
		}
		for _, want := range []string{
			"spend, last 30 days: US$0.06 billed by Meta",
			"Meta's Cloud API accepted 3: 1 delivered, 1 billed, 1 failed (not billed), 1 awaiting a receipt (US$0.06 if delivered)",
			"no Meta cost: 2 through log, 2 through webhook",
		} {
			if !strings.Contains(res.Stdout, want) {
				t.Errorf("%s's text lacks %q:\n%s", cmd, want, res.Stdout)
			}
		}
	}
}
