package main_test

import (
	"cmp"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// routeTemplates is a templates file: the weekly review's template
// (weekly_review_v1, no category: the kind's, marketing, until Meta says
// otherwise) and the reminder's (reminder_v1, declared UTILITY).
const routeTemplates = `{
	"engagement.weekly_review.celebration": {"name":"weekly_review_v1","language":{"pt-BR":"pt_BR"},"params":["count"]},
	"engagement.reminder.come_back": {"name":"reminder_v1","language":{"pt-BR":"pt_BR"},"category":"UTILITY"}}`

// routeEnv is queue-process's environment on the Cloud API against g,
// with the templates file above and, when account is set, the WABA id.
func routeEnv(t *testing.T, url string, g *metafake.Graph, account bool) []string {
	t.Helper()
	templates := filepath.Join(t.TempDir(), "templates.json")
	if err := os.WriteFile(templates, []byte(routeTemplates), 0o600); err != nil {
		t.Fatal(err)
	}
	env := g.CloudEnv(url, templates)
	if account {
		env = append(env, "WHATSAPP_BUSINESS_ACCOUNT_ID="+g.AccountID)
	}
	return cmdtest.Env(env...)
}

// queueTo queues a due message of type and key to number for user and
// returns its id. A reminder is queued as "account_notice", a type of no
// kind (the rule of every door alone), so that its user's state does not
// matter.
func queueTo(t *testing.T, pool *pgxpool.Pool, user, typ, key, number string) string {
	t.Helper()
	return fixture.Queue(t, pool, fixture.Message{User: user, Type: typ, CatalogKey: key, Params: `{"count":"2"}`,
		JID: number + "@s.whatsapp.net", ScheduledFor: time.Now().Add(-time.Minute), Key: fixture.NewID()})
}

func runQueue(t *testing.T, env []string, asOf time.Time) delivery.ProcessSummary {
	t.Helper()
	return queueSummary(t, cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0",
		"--as-of", asOf.Format(time.RFC3339), "--allow-future-as-of", "--output", "json"))
}

// Issue 57 (../shared/CONTRACT.md, round seven, "Marketing Messages API"):
// through queue-process on the Cloud API, a template whose category is
// MARKETING goes to POST /<PHONE_NUMBER_ID>/marketing_messages and a
// UTILITY one to /messages (Meta, "Route template messages by category");
// a marketing template to a +1 number is cancelled before its request
// (us_marketing_blocked) while one to +55 goes, and a utility one to +1
// goes; each ledger row keeps the category the request was routed by and
// whether the user's service window was open at the request (a user who
// wrote 3 h before: open; 3 days before: closed). Before, all went to
// /messages, the +1 marketing one included, and the ledger kept neither.
func TestTemplatesAreRoutedByCategoryAndUSMarketingIsCancelled(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	asOf := fixture.Now(t, pool).Add(time.Hour).Truncate(time.Second)
	recent := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-3 * time.Hour)})
	old := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-72 * time.Hour)})

	marketingBR := queueTo(t, pool, recent, "weekly_review", "engagement.weekly_review.celebration", "5511988887777")
	utilityBR := queueTo(t, pool, old, "account_notice", "engagement.reminder.come_back", "5511988886666")
	marketingUS := queueTo(t, pool, old, "weekly_review", "engagement.weekly_review.celebration", "15550001111")
	utilityUS := queueTo(t, pool, recent, "account_notice", "engagement.reminder.come_back", "15550002222")

	sum := runQueue(t, routeEnv(t, url, g, false), asOf)
	if got := g.MarketingSent(); got["weekly_review_v1"] != 1 || len(got) != 1 {
		t.Errorf("/marketing_messages got %v; want the one weekly review to +55", got)
	}
	if got := g.Sent(); got["reminder_v1"] != 2 || len(got) != 1 {
		t.Errorf("/messages got %v; want the two reminders (utility), to +55 and +1", got)
	}
	if slices.Contains(g.Recipients(), "15550001111") {
		t.Errorf("the +1 marketing message reached Meta: %v", g.Recipients())
	}
	if sum.CancelReasons["us_marketing_blocked"] != 1 || sum.Sent != 3 {
		t.Errorf("summary: sent %d, cancelled %v; want 3 sent and 1 us_marketing_blocked", sum.Sent, sum.CancelReasons)
	}
	m := fixture.MessageByID(t, pool, marketingUS)
	status, reason := m.Status, fixture.Deref(m.CancelReason)
	if status != "cancelled" || reason != "us_marketing_blocked" {
		t.Errorf("the +1 marketing message is %s (%s); want cancelled, us_marketing_blocked", status, reason)
	}
	for id, want := range map[string]string{marketingBR: "marketing true", utilityBR: "utility false", utilityUS: "utility true"} {
		got := "no ledger row"
		if l := fixture.LedgerOf(t, pool, id, ""); l != nil {
			window := "-"
			if l.ServiceWindow != nil {
				window = strconv.FormatBool(*l.ServiceWindow)
			}
			got = cmp.Or(fixture.Deref(l.MetaCategory), "-") + " " + window
		}
		if got != want {
			t.Errorf("ledger of %s: %q, want %q (category routed by, service window open)", id, got, want)
		}
	}
	if n := fixture.CountLedger(t, pool, fixture.LedgerRows{Message: marketingUS}); n != 0 {
		t.Errorf("the +1 marketing message has %d ledger rows; want none: no request was made", n)
	}
}

// Issue 57: the Message Templates API's category is what a run routes by
// (it outranks the kind's and the templates file's), and a lying API (a
// 500, not JSON, no data array, an answer slower than 5 s) keeps the last
// category it said right; an entry of the wrong shape is skipped, the
// others recorded. Meta says weekly_review_v1 is UTILITY: to /messages,
// although the kind is marketing; then the API lies in every way: still
// /messages; then Meta says MARKETING: /marketing_messages.
func TestTheTemplatesAPIsCategoryRoutesAndALyingOneKeepsTheLastKnown(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	env := routeEnv(t, url, g, true)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	asOf := fixture.Now(t, pool).Add(time.Hour).Truncate(time.Second)
	run := func(what string, wantMarketing bool) {
		t.Helper()
		queueTo(t, pool, user, "weekly_review", "engagement.weekly_review.celebration", "5511988887777")
		before, beforeMM := g.Sent()["weekly_review_v1"], g.MarketingSent()["weekly_review_v1"]
		runQueue(t, env, asOf)
		sent, mm := g.Sent()["weekly_review_v1"]-before, g.MarketingSent()["weekly_review_v1"]-beforeMM
		if wantMarketing && (mm != 1 || sent != 0) || !wantMarketing && (sent != 1 || mm != 0) {
			t.Errorf("%s: /messages %d, /marketing_messages %d; want it on /%s", what, sent, mm,
				map[bool]string{true: "marketing_messages", false: "messages"}[wantMarketing])
		}
	}
	// Three pages: the one that matters is on the second, beside an entry
	// of the wrong shape.
	g.SetTemplates(
		metafake.TemplateEntry{ID: "1", Name: "welcome_v1", Language: "pt_BR", Category: "UTILITY"},
		metafake.TemplateEntry{ID: "2", Name: "promo_v1", Language: "pt_BR", Category: "MARKETING"},
		metafake.TemplateEntry{ID: "3", Name: "broken_v1", Language: "pt_BR", Category: "PROMOTIONAL"},
		metafake.TemplateEntry{ID: "4", Name: "weekly_review_v1", Language: "pt_BR", Category: "UTILITY"},
		metafake.TemplateEntry{ID: "5", Name: "reminder_v1", Language: "pt_BR", Category: "UTILITY"})
	run("Meta says UTILITY", false)
	if n := fixture.CountTemplateCategories(t, pool, "templates_api"); n != 4 {
		t.Errorf("%d categories recorded from the API; want the 4 of Meta's shape", n)
	}
	for name, lie := range map[string]func(){
		"a 500":          func() { g.AnswerTemplates(http.StatusInternalServerError, `{"error":{"code":1}}`, 0) },
		"not JSON":       func() { g.AnswerTemplates(http.StatusOK, `<html>`, 0) },
		"no data":        func() { g.AnswerTemplates(http.StatusOK, `{"paging":{}}`, 0) },
		"data an object": func() { g.AnswerTemplates(http.StatusOK, `{"data":{"name":"weekly_review_v1"}}`, 0) },
		"wrong types": func() {
			g.AnswerTemplates(http.StatusOK, `{"data":[{"name":"weekly_review_v1","language":"pt_BR","category":7},`+
				`{"name":["weekly_review_v1"],"language":"pt_BR","category":"MARKETING"},`+
				`{"name":"weekly_review_v1","category":"MARKETING"}]}`, 0)
		},
		"slower than 5 s": func() {
			g.AnswerTemplates(http.StatusOK, `{"data":[{"name":"weekly_review_v1","language":"pt_BR","category":"MARKETING"}]}`, 6*time.Second)
		},
	} {
		lie()
		run("UTILITY, then "+name, false)
	}
	g.SetTemplates(metafake.TemplateEntry{ID: "4", Name: "weekly_review_v1", Language: "pt_BR", Category: "MARKETING"})
	run("Meta says MARKETING", true)
}
