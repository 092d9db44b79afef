package main_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 57 (Meta, "Route template messages by category": update the
// mapping only on the completed notification, with new_category; an
// impending one is monitoring information): the weekly review's template,
// declared UTILITY in the templates file, goes to /messages. A signed
// impending template_category_update (UTILITY to MARKETING tomorrow)
// changes nothing: the next run still sends it to /messages. The signed
// completed one does: the next run sends it to /marketing_messages. A
// completed one triggered before it (MARKETING back to UTILITY, an hour
// older), arriving after it, changes nothing.
func TestACategoryChangeRoutesOnlyOnceCompleted(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	env := g.Env(t, url, "UTILITY")
	c := startConsole(t, cmdtest.Build(t, "./cmd/engagement-console"), url,
		"--whatsapp-app-secret", appSecret, "--whatsapp-verify-token", verifyToken)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	asOf := fixture.Now(t, pool).Add(time.Hour).Truncate(time.Second)
	run := func(what, want string) {
		t.Helper()
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
			Params: `{"count":"2"}`, JID: "5511988887777@s.whatsapp.net", ScheduledFor: fixture.Now(t, pool).Add(-time.Minute),
			Key: fixture.NewID()})
		before, beforeMM := g.Sent()["weekly_review_v1"], g.MarketingSent()["weekly_review_v1"]
		res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0",
			"--as-of", asOf.Format(time.RFC3339), "--allow-future-as-of", "--output", "json")
		var sum delivery.ProcessSummary
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &sum) != nil || sum.Sent != 1 {
			t.Fatalf("%s: exit %d, %s %s; want the weekly review sent", what, res.Code, res.Stdout, res.Stderr)
		}
		got := "messages"
		if g.MarketingSent()["weekly_review_v1"] > beforeMM {
			got = "marketing_messages"
		}
		if g.Sent()["weekly_review_v1"]+g.MarketingSent()["weekly_review_v1"] != before+beforeMM+1 || got != want {
			t.Errorf("%s: sent to /%s; want /%s", what, got, want)
		}
	}
	run("declared UTILITY", "messages")

	now := time.Now().Truncate(time.Second)
	postSigned(t, c, metafake.TemplateCategoryUpdate("weekly_review_v1", "pt_BR", "UTILITY", "MARKETING", false, now.Add(-time.Minute)),
		"the impending notification")
	run("after the impending notification", "messages")

	postSigned(t, c, metafake.TemplateCategoryUpdate("weekly_review_v1", "pt_BR", "UTILITY", "MARKETING", true, now),
		"the completed notification")
	run("after the completed notification", "marketing_messages")

	postSigned(t, c, metafake.TemplateCategoryUpdate("weekly_review_v1", "pt_BR", "MARKETING", "UTILITY", true, now.Add(-time.Hour)),
		"an older completed notification")
	run("after an older completed notification", "marketing_messages")

	rec := fixture.ConsoleTemplateCategoryOf(t, pool, "weekly_review_v1", "pt_BR")
	if rec == nil {
		t.Fatal("no category recorded of weekly_review_v1 in pt_BR")
	}
	templateID, account := orDash(rec.TemplateID), orDash(rec.AccountID)
	if rec.Source != "webhook" || rec.Category != "MARKETING" || templateID != "1689556908129832" || account != "102290129340398" {
		t.Errorf("recorded %s %s (template %s, account %s); want MARKETING from the webhook, with Meta's ids",
			rec.Source, rec.Category, templateID, account)
	}
}

// A template_category_update Meta never documented (no new_category, a
// category no word of Meta's, a language of the wrong type, neither
// previous_category nor correct_category) is skipped, acknowledged 200,
// and changes nothing.
func TestAnUnusableCategoryUpdateChangesNothing(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	c := startConsole(t, cmdtest.Build(t, "./cmd/engagement-console"), url,
		"--whatsapp-app-secret", appSecret, "--whatsapp-verify-token", verifyToken)
	at := time.Now()
	for name, value := range map[string]string{
		"no new_category":     `{"message_template_name":"t_v1","message_template_language":"pt_BR","previous_category":"UTILITY"}`,
		"not Meta's word":     `{"message_template_name":"t_v1","message_template_language":"pt_BR","previous_category":"UTILITY","new_category":"PROMO"}`,
		"language a number":   `{"message_template_name":"t_v1","message_template_language":7,"previous_category":"UTILITY","new_category":"MARKETING"}`,
		"neither kind":        `{"message_template_name":"t_v1","message_template_language":"pt_BR","new_category":"MARKETING"}`,
		"value not an object": `"MARKETING"`,
	} {
		postSigned(t, c, metafake.Account("template_category_update", at, value), name)
	}
	if n := len(fixture.ConsoleTemplateCategories(t, pool)); n != 0 {
		t.Errorf("%d categories recorded; want none from values Meta never documented", n)
	}
}

// orDash is a NULL-able text column's value, or - for NULL.
func orDash(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
