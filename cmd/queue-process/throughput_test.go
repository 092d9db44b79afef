package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// phoneNumber is a Phone Number node's answer carrying fields (raw JSON members).
func phoneNumber(fields string) string {
	s := `{"verified_name":"Engagement","display_phone_number":"+55 11 99999-0000","id":"106540352242922",` +
		`"quality_rating":"GREEN","messaging_limit_tier":"TIER_100K","status":"CONNECTED"`
	if fields != "" {
		s += "," + fields
	}
	return s + "}"
}

// checkAllSentOnce fails the test unless each of the n queued messages is
// sent, reached the Graph API's accepted sends once, and spent no retry.
func checkAllSentOnce(t *testing.T, pool *pgxpool.Pool, g *metafake.Graph, n int) {
	t.Helper()
	// The weekly review is a marketing template: the Marketing Messages
	// API takes it (routes_test.go).
	if got := g.MarketingSent()["weekly_review_v1"]; got != n {
		t.Errorf("Meta took %d messages, want each of the %d once", got, n)
	}
	if sent := fixture.CountMessages(t, pool, fixture.Messages{Status: "sent"}); sent != n {
		t.Errorf("%d messages sent in the queue, want %d", sent, n)
	}
	if spent := fixture.SendFiguresOf(t, pool, time.Time{}).Retried; spent != 0 {
		t.Errorf("%d messages spent a retry on Meta's 130429, want none (the number was over, not the message)", spent)
	}
}

// Issue 57 (Meta, "Throughput",
// https://developers.facebook.com/documentation/business-messaging/whatsapp/throughput:
// above the number's throughput, Meta answers 130429 "until you are within
// your allowed level again"). The Graph API says STANDARD (80 mps), but
// Meta takes only 20 sends a second (the rest of its 80 go to the users'
// own messages, which count too) and answers 130429 to the others. The
// run slows as a whole: once Meta said 130429, its rate is below the
// ceiling, Meta had to say it far fewer times than there are messages,
// and no message failed or spent a retry: each went once, later. Before,
// 16 workers posted as fast as the fake answered, each 130429 retried its
// one message 5 s later, spending a retry, and messages failed.
func TestMetas130429SlowsTheWholeRunAndFailsNothing(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	g.SetNumber(phoneNumber(`"throughput":{"level":"STANDARD"},"is_on_biz_app":false`))
	g.LimitPerSecond(20)
	const n = 120
	queueRecipients(t, pool, n)

	sum := queueSummary(t, cmdtest.Exec(t, queuecmd.NewCommand, graphEnv(t, url, g), "--send-interval", "0", "--output", "json"))
	refused := len(g.RateLimited())
	if refused == 0 {
		t.Fatalf("Meta never said 130429: the test proves nothing (arrivals %d)", len(g.Arrivals()))
	}
	tp := sum.Throughput
	switch {
	case tp == nil:
		t.Fatalf("summary without throughput: %+v", sum)
	case tp.CeilingMPS != 80 || tp.Source != "graph_api":
		t.Errorf("ceiling %d from %q, want 80 from graph_api", tp.CeilingMPS, tp.Source)
	case tp.RateLimited != refused:
		t.Errorf("summary counts %d 130429s, Meta said it %d times", tp.RateLimited, refused)
	case tp.RateMPS >= float64(tp.CeilingMPS):
		t.Errorf("the run ended at %.1f mps, not below the ceiling of %d after %d 130429s", tp.RateMPS, tp.CeilingMPS, refused)
	}
	if refused >= n/2 {
		t.Errorf("Meta said 130429 %d times for %d messages: the run did not slow down", refused, n)
	}
	if sum.Failed != 0 || sum.Sent != n {
		t.Errorf("sent %d, failed %d; want all %d sent, none failed", sum.Sent, sum.Failed, n)
	}
	checkAllSentOnce(t, pool, g, n)
}

// On a number in use with the WhatsApp Business app too (is_on_biz_app:
// Meta's fixed 20 mps), 60 messages take at least 2 s at Meta, whatever
// the workers: n sends at no more than 20 a second span at least
// (n-20)/20 s from the first to the last, on any machine (a slow one only
// spreads them more). Before, they all arrived within a fraction of a
// second.
func TestACoexistenceNumberGoesAtTwentyASecond(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	g.SetNumber(phoneNumber(`"throughput":{"level":"STANDARD"},"is_on_biz_app":true,"platform_type":"CLOUD_API"`))
	g.LimitPerSecond(20)
	const n = 60
	queueRecipients(t, pool, n)

	sum := queueSummary(t, cmdtest.Exec(t, queuecmd.NewCommand, graphEnv(t, url, g), "--send-interval", "0", "--output", "json"))
	if tp := sum.Throughput; tp == nil || tp.CeilingMPS != 20 || tp.Source != "business_app" {
		t.Errorf("throughput %+v, want a ceiling of 20 from business_app", tp)
	}
	arrivals := g.Arrivals()
	if len(arrivals) < n {
		t.Fatalf("%d sends arrived, want at least %d", len(arrivals), n)
	}
	if span := arrivals[len(arrivals)-1].Sub(arrivals[0]); span < time.Duration(n-20)*time.Second/20 {
		t.Errorf("%d sends arrived within %s: faster than 20 a second", len(arrivals), span)
	}
	if sum.Failed != 0 {
		t.Errorf("failed %d, want none", sum.Failed)
	}
	checkAllSentOnce(t, pool, g, n)
}

// The ceiling follows Meta's level (HIGH 1,000, STANDARD 80, on the
// Business app 20), and an answer that does not say (a field missing or
// of the wrong type, NOT_APPLICABLE, a 500, not JSON) is the safe side: 80,
// or 20 for a number seen on the Business app until Meta says it is not.
// --whatsapp-throughput caps it (and stands in for an unread level);
// --whatsapp-coexistence makes it 20.
func TestTheNumbersThroughputLevelSetsTheCeiling(t *testing.T) {
	t.Parallel()
	_, url := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	env := graphEnv(t, url, g)
	for _, c := range []struct {
		name, answer string
		status       int
		flags        []string
		ceiling      int
		source       string
	}{
		{"HIGH", phoneNumber(`"throughput":{"level":"HIGH"}`), 200, nil, 1000, "graph_api"},
		{"STANDARD", phoneNumber(`"throughput":{"level":"STANDARD"},"is_on_biz_app":false`), 200, nil, 80, "graph_api"},
		{"level missing", phoneNumber(``), 200, nil, 80, "default"},
		{"NOT_APPLICABLE", phoneNumber(`"throughput":{"level":"NOT_APPLICABLE"}`), 200, nil, 80, "default"},
		{"level a number", phoneNumber(`"throughput":{"level":1000}`), 200, nil, 80, "default"},
		{"a 500", phoneNumber(`"throughput":{"level":"HIGH"}`), 500, nil, 80, "default"},
		{"HIGH, capped by the flag", phoneNumber(`"throughput":{"level":"HIGH"}`), 200, []string{"--whatsapp-throughput", "50"}, 50, "flag"},
		{"not JSON, the flag", `<html>`, 200, []string{"--whatsapp-throughput", "300"}, 300, "flag"},
		{"HIGH, --whatsapp-coexistence", phoneNumber(`"throughput":{"level":"HIGH"}`), 200, []string{"--whatsapp-coexistence"}, 20, "business_app"},
		{"on the Business app", phoneNumber(`"throughput":{"level":"HIGH"},"is_on_biz_app":true`), 200, nil, 20, "business_app"},
		{"then is_on_biz_app missing", phoneNumber(`"throughput":{"level":"HIGH"}`), 200, nil, 20, "business_app"},
		{"then is_on_biz_app a string", phoneNumber(`"throughput":{"level":"HIGH"},"is_on_biz_app":"false"`), 200, nil, 20, "business_app"},
		{"then a 500", phoneNumber(`"is_on_biz_app":false`), 500, nil, 20, "business_app"},
		{"then Meta's false", phoneNumber(`"throughput":{"level":"HIGH"},"is_on_biz_app":false`), 200, nil, 1000, "graph_api"},
	} {
		g.Answer(c.status, c.answer, 0)
		args := append([]string{"--send-interval", "0", "--output", "json"}, c.flags...)
		sum := queueSummary(t, cmdtest.Exec(t, queuecmd.NewCommand, env, args...))
		if tp := sum.Throughput; tp == nil || tp.CeilingMPS != c.ceiling || tp.Source != c.source {
			t.Errorf("%s: throughput %+v, want a ceiling of %d from %s", c.name, tp, c.ceiling, c.source)
		}
	}
}

// --whatsapp-throughput outside 1 to 1000 is a usage error (exit 2) with
// one line naming it, before any work.
func TestAThroughputOutOfRangeIsAUsageError(t *testing.T) {
	t.Parallel()
	_, url := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	for _, n := range []string{"1001", "-5"} {
		res := cmdtest.Exec(t, queuecmd.NewCommand, graphEnv(t, url, g), "--whatsapp-throughput", n)
		if res.Code != 2 || !strings.Contains(res.Stderr, "throughput") || strings.Count(strings.TrimSpace(res.Stderr), "\n") > 0 {
			t.Errorf("--whatsapp-throughput %s: exit %d, stderr %q; want exit 2 and one line naming the throughput", n, res.Code, res.Stderr)
		}
	}
}
