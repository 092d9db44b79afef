package main_test

import (
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/pricing"
)

// Issue 57's acceptance, "prices per category and country, free utility
// inside the window", end to end through the shipped binaries, with no
// ledger row written by the test: engagementctl declares a custom type
// (billing_reminder) utility and queues the messages; queue-process sends
// them through the Cloud API (metafake's Graph), and its send ledger
// records the category each was routed by and whether the user's window
// was open; the console takes Meta's signed delivered statuses, pricing
// included; engagementctl status and the console's queue page cost them.
//
// The messages: the weekly review (a MARKETING template) to Ana in
// Brazil, who wrote 3 h ago; a billing_reminder (on the reminder's
// template, declared with no category: the type's, utility) to Ana, to
// Bruno in Brazil (wrote 3 days ago), to Carol in the US (wrote 3 days
// ago) and to Dora in Brazil (wrote 2 h ago). Meta's statuses are in the
// shape of its status messages webhook reference (metafake.Pricing).
//
// queue-process sends now: its --as-of only simulates a later instant
// (queuecmd's clockOffset refuses a past one), so the sends cannot happen
// before Meta's change of 2026-10-01 (pricing.FreeUtilityInWindowUntil)
// and the test holds the rule after it: a utility template inside an
// open window is billed unless Meta says billable false. Before Meta
// says anything, status's estimate (awaiting_usd) prices each by the
// ledger's category and the recipient's country: the reminders are
// utility, not "unknown" (the spend does not know a declared type's
// category: only the ledger says it). Meta then says Ana's reminder is
// billable (type regular: the window no longer makes it free) and Dora's
// not (billable false, free_customer_service): billed at BR utility and
// free; Bruno's at BR utility; Carol's at US utility; the weekly review
// at BR marketing. The ledger's service_window (what the spend makes a
// utility template free by before 2026-10-01; no price after it depends
// on it) is checked as queue-process recorded it. Without the ledger's
// meta_category the reminders' estimate is "unknown", not priced; without
// its service_window the ledger check fails.
func TestPricesPerCategoryAndCountryThroughTheShippedBinaries(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	now := fixture.Now(t, pool)
	if now.Before(pricing.FreeUtilityInWindowUntil) {
		t.Fatalf("the database clock (%s) is before %s: this test holds Meta's rule after it", now, pricing.FreeUtilityInWindowUntil)
	}
	g := metafake.NewGraph(t)
	dir := t.TempDir()
	templates, prices := filepath.Join(dir, "templates.json"), filepath.Join(dir, "prices.json")
	for file, body := range map[string]string{
		templates: `{"engagement.weekly_review.celebration":
			{"name":"weekly_review_v1","language":{"pt-BR":"pt_BR"},"params":["count"],"category":"MARKETING"},
			"engagement.reminder.come_back": {"name":"reminder_v1","language":{"pt-BR":"pt_BR"}}}`,
		prices: `{"as_of": "2026-11-01", "source": "a test's prices", "default_country": "BR",
			"countries": {"BR": {"calling_code": "55", "prices": {"marketing": 0.0625, "utility": 0.0068}},
			              "US": {"calling_code": "1", "prices": {"marketing": 0.025, "utility": 0.0034}}}}`,
	} {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctlEnv := cmdtest.Env("DATABASE_URL="+url, "USER=ops")
	if res := cmdtest.Exec(t, ctl.NewCommand, ctlEnv, "categories", "set", "billing_reminder", "utility"); res.Code != 0 {
		t.Fatalf("categories set billing_reminder utility: exit %d: %s", res.Code, res.Stderr)
	}

	user := func(number string, wrote time.Duration) (string, string) {
		jid := number + "@s.whatsapp.net"
		return fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-wrote), WhatsAppJID: &jid}), number
	}
	ana, anaNo := user("5511988880001", 3*time.Hour)
	bruno, brunoNo := user("5511988880002", 72*time.Hour)
	carol, carolNo := user("14155550101", 72*time.Hour)
	dora, doraNo := user("5511988880003", 2*time.Hour)
	enqueue := func(user, typ, key, params string) string {
		t.Helper()
		res := cmdtest.Exec(t, ctl.NewCommand, ctlEnv, "enqueue", "--user-id", user, "--type", typ, "--key", key,
			"--params", params, "--output", "json")
		var out struct {
			ID string `json:"id"`
		}
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &out) != nil || out.ID == "" {
			t.Fatalf("enqueue %s: exit %d: %s %s", typ, res.Code, res.Stdout, res.Stderr)
		}
		return out.ID
	}
	type message struct {
		id, to string
		meta   metafake.Pricing // what Meta's delivered status says
		ledger string           // the ledger's meta_category and service_window
	}
	utility := func(billable bool, typ string) metafake.Pricing {
		return metafake.Pricing{Billable: billable, Category: "utility", Type: typ}
	}
	messages := map[string]message{
		"Ana's weekly review": {enqueue(ana, "weekly_review", "engagement.weekly_review.celebration", `{"count":"2"}`), anaNo,
			metafake.Pricing{Billable: true, Category: "marketing", Type: "regular"}, "marketing true"},
		"Ana's reminder":   {enqueue(ana, "billing_reminder", "engagement.reminder.come_back", `{}`), anaNo, utility(true, "regular"), "utility true"},
		"Bruno's reminder": {enqueue(bruno, "billing_reminder", "engagement.reminder.come_back", `{}`), brunoNo, utility(true, "regular"), "utility false"},
		"Carol's reminder": {enqueue(carol, "billing_reminder", "engagement.reminder.come_back", `{}`), carolNo, utility(true, "regular"), "utility false"},
		"Dora's reminder": {enqueue(dora, "billing_reminder", "engagement.reminder.come_back", `{}`), doraNo,
			utility(false, "free_customer_service"), "utility true"},
	}

	// queue-process on the database clock: the Graph answers each with a
	// wamid, marketing on /marketing_messages, utility on /messages.
	res := cmdtest.Exec(t, queuecmd.NewCommand, cmdtest.Env(g.CloudEnv(url, templates)...), "--send-interval", "0", "--output", "json")
	var sum delivery.ProcessSummary
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &sum) != nil || sum.Sent != len(messages) {
		t.Fatalf("queue-process: exit %d, sent %d of %d: %s %s", res.Code, sum.Sent, len(messages), res.Stdout, res.Stderr)
	}
	if mm, m := g.MarketingSent(), g.Sent(); mm["weekly_review_v1"] != 1 || len(mm) != 1 || m["reminder_v1"] != 4 || len(m) != 1 {
		t.Errorf("/marketing_messages got %v, /messages %v; want the weekly review on the first, the 4 reminders on the second", mm, m)
	}
	for name, m := range messages {
		l := fixture.LedgerOf(t, pool, m.id, "")
		if l == nil {
			t.Fatalf("%s has no ledger row", name)
		}
		window := "-" // service_window::text, or - for NULL
		if l.ServiceWindow != nil {
			window = strconv.FormatBool(*l.ServiceWindow)
		}
		got := orDash(l.MetaCategory) + " " + window
		if got != m.ledger {
			t.Errorf("%s's ledger: %q, want %q (the category routed by, the window open at the request)", name, got, m.ledger)
		}
	}

	type category struct {
		Category    string  `json:"category"`
		Accepted    int64   `json:"accepted"`
		Delivered   int64   `json:"delivered"`
		Billable    int64   `json:"billable"`
		Awaiting    int64   `json:"awaiting"`
		Unpriced    int64   `json:"unpriced"`
		USD         float64 `json:"usd"`
		AwaitingUSD float64 `json:"awaiting_usd"`
	}
	type spend struct {
		USD        float64    `json:"usd"`
		Categories []category `json:"categories"`
	}
	byCategory := func(s spend) map[string]category {
		out := map[string]category{}
		for _, c := range s.Categories {
			out[c.Category] = c
		}
		return out
	}
	status := func() map[string]category {
		t.Helper()
		res := cmdtest.Exec(t, ctl.NewCommand, ctlEnv, "status", "--output", "json", "--prices-file", prices)
		var st struct {
			Spend spend `json:"spend"`
		}
		if err := json.Unmarshal([]byte(res.Stdout), &st); res.Code != 0 || err != nil {
			t.Fatalf("engagementctl status: exit %d, %v: %s", res.Code, err, res.Stderr)
		}
		return byCategory(st.Spend)
	}
	const brMarketing, brUtility, usUtility = 0.0625, 0.0068, 0.0034

	// Before Meta says anything: each awaiting, priced by the ledger's
	// category and the country; the window frees nothing after 2026-10-01.
	cats := status()
	if m := cats["marketing"]; len(cats) != 2 || m.Accepted != 1 || m.Awaiting != 1 || m.Unpriced != 0 || !near(m.AwaitingUSD, brMarketing) {
		t.Errorf("before Meta's statuses, %+v; want marketing: 1 awaiting at BR marketing (US$%v), and utility alone besides", cats, brMarketing)
	}
	if u, want := cats["utility"], 3*brUtility+usUtility; u.Accepted != 4 || u.Awaiting != 4 || u.Unpriced != 0 || !near(u.AwaitingUSD, want) {
		t.Errorf("before Meta's statuses, utility %+v; want 4 awaiting, 3 at BR utility and 1 at US utility (US$%v)", u, want)
	}

	// Meta's signed delivered statuses, with its pricing, for the wamids
	// the Graph answered, to the shipped console.
	bin := cmdtest.Build(t, "./cmd/engagement-console")
	c := startConsole(t, bin, url, "--whatsapp-app-secret", appSecret, "--whatsapp-verify-token", verifyToken)
	var sentAt time.Time
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Status: "sent"}) {
		if m.SentAt != nil && m.SentAt.After(sentAt) {
			sentAt = *m.SentAt
		}
	}
	if sentAt.IsZero() {
		t.Fatal("no message was sent")
	}
	at := sentAt.Truncate(time.Second).Add(time.Second) // Meta's timestamps are Unix seconds
	var entries []string
	for _, a := range g.Answers() {
		which := fixture.QueueRowByProvider(t, pool, a.ID).ID
		for _, m := range messages {
			if m.id == which {
				entries = append(entries, metafake.PricedStatus(a.ID, "delivered", a.To, at, "", m.meta))
			}
		}
	}
	if len(entries) != len(messages) {
		t.Fatalf("%d statuses for %d messages: the Graph answered %+v", len(entries), len(messages), g.Answers())
	}
	postSigned(t, c, metafake.Statuses(entries...), "Meta's delivered statuses")

	// Then each is priced by Meta's category and the recipient's country;
	// Dora's reminder, which Meta says is free, costs nothing; Ana's, inside
	// the window too, is billed.
	check := func(where string, cats map[string]category) {
		t.Helper()
		if m := cats["marketing"]; len(cats) != 2 || m.Delivered != 1 || m.Billable != 1 || m.Awaiting != 0 || !near(m.USD, brMarketing) {
			t.Errorf("%s: %+v; want marketing: 1 delivered and billed at BR marketing (US$%v), and utility alone besides", where, cats, brMarketing)
		}
		if u, want := cats["utility"], 2*brUtility+usUtility; u.Delivered != 4 || u.Billable != 3 || u.Awaiting != 0 || u.Unpriced != 0 || !near(u.USD, want) {
			t.Errorf("%s: utility %+v; want 4 delivered, 3 billed: Ana's and Bruno's at BR utility, Carol's at US utility (US$%v); Dora's free",
				where, u, want)
		}
	}
	check("engagementctl status", status())
	// The console's queue page is a snapshot (at most --max-age old): one
	// started now reads it after Meta's statuses, without waiting.
	pages := startConsole(t, bin, url, "--prices-file", prices)
	req, _ := http.NewRequest(http.MethodGet, pages.base+"/queue", nil)
	req.SetBasicAuth("ops", opsPassword)
	req.Header.Set("Accept", "application/json")
	code, body := pages.do(t, req)
	var page struct {
		Spend spend `json:"spend"`
	}
	if err := json.Unmarshal([]byte(body), &page); code != http.StatusOK || err != nil {
		t.Fatalf("GET /queue: %d, %v: %.300s", code, err, body)
	}
	check("the console's queue page", byCategory(page.Spend))
	if want := brMarketing + 2*brUtility + usUtility; math.Abs(page.Spend.USD-want) > 1e-9 {
		t.Errorf("the console's spend: US$%v, want US$%v", page.Spend.USD, want)
	}
}

// near is a == b for sums of dollars.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
