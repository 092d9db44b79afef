package main_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/pricing"
)

// Issue 43: engagementctl status prices the last 30 days' messages from
// --prices-file (ENGAGEMENT_PRICES_FILE) when given, the shipped prices
// otherwise; a file that cannot be read is exit 2, one line, before any
// work.
func TestStatusPricesFile(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	// Four goodbyes the Cloud API sent (the send ledger says so), delivered.
	fixture.CtlDeliveredSends(t, pool, fixture.DeliveredSends{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.default",
		N: 4, JIDPrefix: "5511900000", Ago: 24 * time.Hour, Transport: pricing.MetaTransport})
	dir := t.TempDir()
	prices := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(prices, []byte(`{"as_of": "2026-11-01", "source": "our contract", "default_country": "BR",
		"countries": {"BR": {"calling_code": "55", "prices": {"marketing": 0.5}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	spend := func(env []string, args ...string) float64 {
		t.Helper()
		res := cmdtest.Exec(t, ctl.NewCommand, env, append([]string{"status", "--output", "json"}, args...)...)
		var st struct {
			Spend struct {
				USD      float64 `json:"usd"`
				Billable int64   `json:"billable"`
			} `json:"spend"`
		}
		if err := json.Unmarshal([]byte(res.Stdout), &st); res.Code != 0 || err != nil || st.Spend.Billable != 4 {
			t.Fatalf("status %v: exit %d, %v, %+v; want 4 billable: %s", args, res.Code, err, st.Spend, res.Stderr)
		}
		return st.Spend.USD
	}
	env := cmdtest.Env("DATABASE_URL=" + url)
	if got := spend(env); got != 4*0.0625 {
		t.Errorf("the shipped prices: US$%v, want %v", got, 4*0.0625)
	}
	if got := spend(env, "--prices-file", prices); got != 2 {
		t.Errorf("the prices of --prices-file: US$%v, want 2", got)
	}
	if got := spend(cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_PRICES_FILE="+prices)); got != 2 {
		t.Errorf("the prices of ENGAGEMENT_PRICES_FILE: US$%v, want 2", got)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"countries": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{bad, filepath.Join(dir, "missing.json")} {
		res := cmdtest.Exec(t, ctl.NewCommand, env, "status", "--prices-file", f)
		if res.Code != 2 || len(cmdtest.Lines(res.Stderr)) != 1 || !strings.Contains(res.Stderr, "--prices-file") {
			t.Errorf("status --prices-file %s: exit %d, stderr %q; want 2 and one line naming the flag", filepath.Base(f), res.Code, res.Stderr)
		}
	}
}

// Issue 57: engagementctl status prices each Cloud API message by its
// latest category and its recipient's country. The category is Meta's
// (pricing_category, from its status webhook) when Meta said it, else the
// one queue-process routed the template by (the send ledger's
// meta_category), else the kind's. A utility template delivered inside an
// open customer service window (the ledger's service_window) was free
// until Meta's change of 2026-10-01 and is billed after it, unless Meta
// says billable false; a marketing one is always billed. A recipient in a
// country without prices is counted, not priced. The ledger rows are
// written as queue-process writes them, the receipts through
// engagement_receipt.
func TestStatusPricesByLatestCategoryCountryAndWindow(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)})
	// send records a goodbye (a marketing kind) that queue-process sent
	// through the Cloud API at sentAt to jid, routed as routed (the
	// ledger's meta_category) with the window open or not, and what Meta's
	// webhook said of its pricing; delivered: a delivered receipt a minute
	// later.
	send := func(sentAt time.Time, jid, routed string, window bool, metaCategory *string, billable *bool, delivered bool) {
		t.Helper()
		id, pid := fixture.NewID(), fixture.NewID()
		fixture.CtlPricedSend(t, pool, fixture.PricedSend{ID: id, User: user, JID: jid, SentAt: sentAt, Key: fixture.NewID(),
			ProviderID: pid, Billable: billable, PricingCategory: metaCategory})
		fixture.Ledger(t, pool, fixture.LedgerRow{Message: id, Transport: pricing.MetaTransport, Status: "sent", ProviderID: pid,
			LastAttempt: sentAt, MetaCategory: routed, Window: &window})
		if delivered {
			fixture.CtlReceipt(t, pool, pid, "delivered", sentAt.Add(time.Minute))
		}
	}
	br, us, cn := "5511999990000@s.whatsapp.net", "14155550100@s.whatsapp.net", "8613800138000@s.whatsapp.net"
	marketing, yes, no := fixture.Ptr("marketing"), fixture.Ptr(true), fixture.Ptr(false)

	// Before Meta's change of 2026-10-01.
	before := time.Date(2026, 9, 20, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	send(before.Add(-day), br, "marketing", false, nil, nil, true)     // BR marketing
	send(before.Add(-day), us, "utility", false, nil, nil, true)       // routed as utility, not the kind's marketing: US utility
	send(before.Add(-day), br, "utility", false, marketing, yes, true) // Meta said marketing: BR marketing
	send(before.Add(-2*day), br, "utility", true, nil, nil, true)      // utility inside the window: free
	send(before.Add(-2*day), br, "marketing", true, nil, nil, true)    // marketing inside the window: billed
	send(before.Add(-3*day), cn, "marketing", false, nil, nil, true)   // China: no price, counted
	send(before.Add(-time.Hour), br, "utility", true, nil, nil, false) // awaiting, free if delivered
	// After it: a utility template inside the window is billed, unless
	// Meta says it is not.
	after := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	send(after.Add(-day), br, "utility", true, nil, nil, true) // billed
	send(after.Add(-day), br, "utility", true, nil, no, true)  // Meta: not billable

	dir := t.TempDir()
	prices := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(prices, []byte(`{"as_of": "2026-09-01", "source": "a test's prices", "default_country": "BR",
		"countries": {"BR": {"calling_code": "55", "prices": {"marketing": 0.0625, "utility": 0.0068}},
		              "US": {"calling_code": "1", "prices": {"marketing": 0.03, "utility": 0.01}}}}`), 0o600); err != nil {
		t.Fatal(err)
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
	status := func(asOf time.Time) (usd float64, cats map[string]category) {
		t.Helper()
		res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+url), "status", "--output", "json",
			"--as-of", asOf.Format(time.RFC3339), "--prices-file", prices)
		var st struct {
			Spend struct {
				USD        float64    `json:"usd"`
				Categories []category `json:"categories"`
			} `json:"spend"`
		}
		if err := json.Unmarshal([]byte(res.Stdout), &st); res.Code != 0 || err != nil {
			t.Fatalf("status --as-of %s: exit %d, %v: %s", asOf.Format(time.DateOnly), res.Code, err, res.Stderr)
		}
		cats = map[string]category{}
		for _, c := range st.Spend.Categories {
			cats[c.Category] = c
		}
		return st.Spend.USD, cats
	}

	usd, cats := status(before)
	m, u := cats["marketing"], cats["utility"]
	// marketing: the two BR routed as marketing, the one Meta said was
	// marketing (3 × 0.0625) and China's (not priced).
	if m.Accepted != 4 || m.Delivered != 4 || m.Billable != 4 || m.Unpriced != 1 || !near(m.USD, 0.1875) {
		t.Errorf("before 2026-10-01, marketing %+v; want 4 accepted, delivered and billed, 1 not priced (China), US$0.1875", m)
	}
	// utility: the US one billed at the US price; the BR one inside the
	// window free; the one awaiting inside the window free if delivered.
	if u.Accepted != 3 || u.Delivered != 2 || u.Billable != 1 || u.Awaiting != 1 || u.Unpriced != 0 || !near(u.USD, 0.01) || u.AwaitingUSD != 0 {
		t.Errorf("before 2026-10-01, utility %+v; want 3 accepted, 2 delivered, 1 billed (US$0.01, the US), 1 awaiting at US$0", u)
	}
	if !near(usd, 0.1975) || len(cats) != 2 {
		t.Errorf("before 2026-10-01: US$%v over %v; want US$0.1975 over marketing and utility", usd, cats)
	}

	usd, cats = status(after)
	if u := cats["utility"]; u.Delivered != 2 || u.Billable != 1 || !near(u.USD, 0.0068) || !near(usd, 0.0068) || len(cats) != 1 {
		t.Errorf("after 2026-10-01: US$%v, utility %+v; want the one inside the window billed (US$0.0068), the one Meta said free not", usd, u)
	}
}

// near is a == b for sums of dollars.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
