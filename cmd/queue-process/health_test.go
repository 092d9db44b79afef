package main_test

import (
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 55, finding 4 (../shared/CONTRACT.md: a lying Graph API can never
// clear a flag or raise a limit): queue-process on the Cloud API reads the
// number's health from Meta's Graph API at each run (the Phone Number
// node, GET /{phone-number-id}?fields=quality_rating,whatsapp_business_manager_messaging_limit,status;
// https://developers.facebook.com/docs/graph-api/reference/whats-app-business-account-to-number-current-status/:
// each a string, status one of CONNECTED, FLAGGED, …). Once the number is
// FLAGGED, an answer whose status is missing, null, of the wrong type or
// no word Meta documents keeps the flag, and the 100 marketing messages it
// holds stay held; before, such an answer cleared the flag and all 100 went
// out. Likewise a tier missing, mistyped, unknown or TIER_NOT_SET keeps
// --daily-limit auto where it was (TIER_NOT_SET used to raise TIER_50's 50
// to 250), and a rating missing or mistyped keeps RED's hold. (Issue 57:
// the tier is now whatsapp_business_manager_messaging_limit, where Meta's
// integers, 250 … 100000 and -1, are limits too; a number Meta does not
// list is still no limit.) Meta's word
// (CONNECTED) still clears the flag.
func TestALyingGraphAPINeverClearsTheFlagNorRaisesTheLimit(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	env := g.Env(t, url, "")
	// Each run is two hours after the one before (--as-of), so that what
	// the last run held for Meta's verdict (an hour,
	// delivery.VerdictRecheck) is due again.
	start, runs := time.Now(), 0
	run := func(answer string) delivery.ProcessSummary {
		t.Helper()
		g.SetNumber(answer)
		runs++
		return queueSummary(t, cmdtest.Exec(t, queuecmd.NewCommand, env, "--daily-limit", "auto", "--send-interval", "0",
			"--as-of", start.Add(time.Duration(runs)*2*time.Hour).Format(time.RFC3339), "--allow-future-as-of", "--output", "json"))
	}
	weekly := func() int { return g.MarketingSent()["weekly_review_v1"] }
	number := func(rating, tier, status string) string {
		return `{"verified_name":"Engagement","display_phone_number":"+55 11 99999-0000","id":"106540352242922",` +
			`"quality_rating":` + rating + `,"whatsapp_business_manager_messaging_limit":` + tier + `,"status":` + status + `}`
	}
	drop := `{"verified_name":"Engagement","display_phone_number":"+55 11 99999-0000","id":"106540352242922"`

	// FLAGGED, YELLOW: the 100 weekly reviews (marketing) wait.
	queueRecipients(t, pool, 100)
	if sum := run(metafake.PhoneNumber("YELLOW", "TIER_1K", "FLAGGED")); weekly() != 0 || sum.DeferReasons["quality"] != 100 ||
		sum.Number == nil || !sum.Number.Flagged {
		t.Fatalf("FLAGGED: sent %d, deferred %v, number %+v; want the 100 held on quality", weekly(), sum.DeferReasons, sum.Number)
	}
	for name, answer := range map[string]string{
		"status missing":         drop + `,"quality_rating":"YELLOW","whatsapp_business_manager_messaging_limit":"TIER_1K"}`,
		"status null":            number(`"YELLOW"`, `"TIER_1K"`, `null`),
		"status a boolean":       number(`"YELLOW"`, `"TIER_1K"`, `false`),
		"status an object":       number(`"YELLOW"`, `"TIER_1K"`, `{"value":"CONNECTED"}`),
		"status a list":          number(`"YELLOW"`, `"TIER_1K"`, `["CONNECTED"]`),
		"status no word of Meta": number(`"YELLOW"`, `"TIER_1K"`, `"ALL_GOOD"`),
		"status empty":           number(`"YELLOW"`, `"TIER_1K"`, `""`),
	} {
		if sum := run(answer); weekly() != 0 || sum.DeferReasons["quality"] != 100 || sum.Number == nil || !sum.Number.Flagged {
			t.Errorf("FLAGGED, then %s: sent %d, deferred %v, number %+v; want the flag kept and the 100 held",
				name, weekly(), sum.DeferReasons, sum.Number)
		}
	}
	// Meta's word clears it: the 100 go.
	if sum := run(metafake.PhoneNumber("YELLOW", "TIER_1K", "CONNECTED")); weekly() != 100 || sum.Number == nil || sum.Number.Flagged {
		t.Errorf("CONNECTED: sent %d, number %+v; want the flag cleared and the 100 sent", weekly(), sum.Number)
	}

	// TIER_50: --daily-limit auto is 50, whatever the lie.
	if sum := run(metafake.PhoneNumber("GREEN", "TIER_50", "CONNECTED")); sum.Budget == nil || sum.Budget.Limit != 50 {
		t.Fatalf("TIER_50: budget %+v, want a limit of 50", sum.Budget)
	}
	for name, answer := range map[string]string{
		"tier missing":             drop + `,"quality_rating":"GREEN","status":"CONNECTED"}`,
		"tier null":                number(`"GREEN"`, `null`, `"CONNECTED"`),
		"tier a number not Meta's": number(`"GREEN"`, `123456`, `"CONNECTED"`),
		"tier a list":              number(`"GREEN"`, `["TIER_100K"]`, `"CONNECTED"`),
		"tier no word of Meta":     number(`"GREEN"`, `"TIER_A_LOT"`, `"CONNECTED"`),
		"TIER_NOT_SET":             number(`"GREEN"`, `"TIER_NOT_SET"`, `"CONNECTED"`),
	} {
		if sum := run(answer); sum.Budget == nil || sum.Budget.Limit != 50 || sum.Number == nil || sum.Number.MessagingLimitTier != "TIER_50" {
			t.Errorf("TIER_50, then %s: budget %+v, number %+v; want TIER_50 kept and a limit of 50", name, sum.Budget, sum.Number)
		}
	}

	// RED: marketing waits, whatever the lie about the rating.
	queueRecipients(t, pool, 10)
	if sum := run(metafake.PhoneNumber("RED", "TIER_50", "CONNECTED")); sum.DeferReasons["quality"] != 10 {
		t.Fatalf("RED: deferred %v, want the 10 new weekly reviews held on quality", sum.DeferReasons)
	}
	for name, answer := range map[string]string{
		"rating missing":         drop + `,"whatsapp_business_manager_messaging_limit":"TIER_50","status":"CONNECTED"}`,
		"rating null":            number(`null`, `"TIER_50"`, `"CONNECTED"`),
		"rating a number":        number(`3`, `"TIER_50"`, `"CONNECTED"`),
		"rating no word of Meta": number(`"PURPLE"`, `"TIER_50"`, `"CONNECTED"`),
	} {
		if sum := run(answer); weekly() != 100 || sum.DeferReasons["quality"] != 10 || sum.Number == nil || sum.Number.QualityRating != "RED" {
			t.Errorf("RED, then %s: sent %d, deferred %v, number %+v; want RED kept and the 10 held", name, weekly()-100, sum.DeferReasons, sum.Number)
		}
	}
}
