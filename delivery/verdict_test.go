package delivery_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/syncbuf"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// cloudOn is the Cloud API transport against g, with a template for the
// goodbye and one for the weekly review.
func cloudOn(t *testing.T, g *metafake.Graph) transport.Transport {
	t.Helper()
	lang := map[string]string{"pt-BR": "pt_BR", "en": "en_US"}
	tr, err := transport.NewWhatsApp(transport.WhatsAppConfig{BaseURL: g.Server.URL, PhoneNumberID: g.PhoneNumberID,
		AccessToken: "tok", Templates: map[string]transport.WhatsAppTemplate{
			"engagement.goodbye.self_select":       {Name: "goodbye_v1", Language: lang},
			"engagement.weekly_review.celebration": {Name: "weekly_review_v1", Language: lang},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// runCloud runs a processor on tr with the daily limit auto or n.
func runCloud(t *testing.T, pool *pgxpool.Pool, tr transport.Transport, auto bool, offset time.Duration) (delivery.ProcessSummary, string) {
	t.Helper()
	var logs syncbuf.Buffer
	p, err := delivery.NewProcessor(pool, delivery.ProcessorConfig{
		Transport: tr, SendInterval: -1, DailyLimitAuto: auto, ClockOffset: offset, Logger: zerolog.New(&logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := p.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return sum, logs.String()
}

// A number rated RED, or FLAGGED: the marketing kinds wait (quality), a
// message of another type (a receipt the bot enqueued) still goes.
func TestMarketingWaitsWhileTheNumberIsRed(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{metafake.PhoneNumber("RED", "TIER_2K", "CONNECTED"), metafake.PhoneNumber("YELLOW", "TIER_2K", "FLAGGED")} {
		pool, _ := pgtest.NewPool(t)
		g := metafake.NewGraph(t)
		g.SetNumber(answer)
		queueKind(t, pool, "weekly_review", 2, time.Minute, time.Minute)
		receipt := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
		fixture.Queue(t, pool, fixture.Message{User: receipt, Type: "payment_receipt", CatalogKey: fixture.WeeklyReview.CatalogKey,
			Params: `{"count":"1"}`, JID: "5511@s.whatsapp.net"})
		sum, _ := runCloud(t, pool, cloudOn(t, g), false, 0)
		if sum.Sent != 1 || sum.DeferReasons["quality"] != 2 || sum.Number == nil || !sum.Number.Holding {
			t.Errorf("%s: sent %d, deferred %v, number %+v; want the receipt sent, the 2 weekly reviews held on quality",
				answer, sum.Sent, sum.DeferReasons, sum.Number)
		}
	}
}

// A template Meta paused (as its webhook recorded) is not sent: its
// messages wait (template_paused) and go once it is back; the others go.
func TestAPausedTemplateIsNotSent(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	tr := cloudOn(t, g)
	queueKind(t, pool, "goodbye", 1, time.Minute, time.Minute)
	queueKind(t, pool, "weekly_review", 1, time.Minute, time.Minute)
	fixture.TemplateStatus(t, pool, "goodbye_v1", "PAUSED")
	sum, _ := runCloud(t, pool, tr, false, 0)
	if sent := g.MarketingSent(); sent["goodbye_v1"] != 0 || sent["weekly_review_v1"] != 1 || sum.DeferReasons["template_paused"] != 1 {
		t.Errorf("sent %v, deferred %v; want the weekly review sent, the goodbye held", sent, sum.DeferReasons)
	}
	fixture.TemplateStatus(t, pool, "goodbye_v1", "REINSTATED")
	runCloud(t, pool, tr, false, delivery.VerdictRecheck+time.Minute)
	if sent := g.MarketingSent(); sent["goodbye_v1"] != 1 {
		t.Errorf("after the template is back: sent %v, want the goodbye", sent)
	}
}

// --daily-limit auto follows the tier Meta reports; a lying Graph API
// (not JSON, a 500, fields of the wrong type or missing, slower than the
// read waits) changes nothing: the run keeps the last known values, says
// so, and sends; with nothing known, the lowest tier, 250.
func TestTheDailyLimitFollowsMetasTierThroughALyingGraphAPI(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	tr := cloudOn(t, g)

	g.Answer(http.StatusInternalServerError, `{"error":{"message":"An unknown error occurred","code":1}}`, 0)
	sum, logs := runCloud(t, pool, tr, true, 0)
	if sum.Budget == nil || sum.Budget.Limit != delivery.DefaultAutoLimit || !strings.Contains(logs, "keeping the last known values") {
		t.Errorf("nothing known: budget %+v, logs %s; want the lowest tier and a warning", sum.Budget, logs)
	}
	g.SetNumber(metafake.PhoneNumber("GREEN", "TIER_10K", "CONNECTED"))
	if sum, _ = runCloud(t, pool, tr, true, 0); sum.Budget == nil || sum.Budget.Limit != 10000 {
		t.Errorf("TIER_10K: budget %+v, want 10000", sum.Budget)
	}
	for name, lie := range map[string]func(){
		"not JSON": func() { g.Answer(http.StatusOK, `<html>Service Unavailable</html>`, 0) },
		"a 500":    func() { g.Answer(http.StatusInternalServerError, `{}`, 0) },
		"wrong types": func() {
			g.SetNumber(`{"quality_rating":3,"whatsapp_business_manager_messaging_limit":["TIER_100K"],"status":true}`)
		},
		"missing fields": func() { g.SetNumber(`{"id":"106540352242922"}`) },
		"unknown values": func() { g.SetNumber(metafake.PhoneNumber("PURPLE", "TIER_A_LOT", "CONNECTED")) },
		"slow": func() {
			g.Answer(http.StatusOK, metafake.PhoneNumber("GREEN", "TIER_100K", "CONNECTED"), 8*time.Second)
		},
	} {
		lie()
		sum, logs := runCloud(t, pool, tr, true, 0)
		if sum.Budget == nil || sum.Budget.Limit != 10000 || sum.Number == nil || !sum.Number.Stale ||
			sum.Number.QualityRating != "GREEN" || !strings.Contains(logs, "keeping the last known values") {
			t.Errorf("%s: budget %+v, number %+v; want the last known tier (10000), GREEN, and a warning; logs %s",
				name, sum.Budget, sum.Number, logs)
		}
	}
	// A RED read once holds marketing while the Graph API then fails.
	g.SetNumber(metafake.PhoneNumber("RED", "TIER_10K", "CONNECTED"))
	runCloud(t, pool, tr, true, 0)
	g.Answer(http.StatusInternalServerError, `{}`, 0)
	queueKind(t, pool, "weekly_review", 1, time.Minute, time.Minute)
	if sum, _ := runCloud(t, pool, tr, true, 0); sum.Sent != 0 || sum.DeferReasons["quality"] != 1 {
		t.Errorf("RED, then a 500: sent %d, deferred %v; want the weekly review held", sum.Sent, sum.DeferReasons)
	}
}
