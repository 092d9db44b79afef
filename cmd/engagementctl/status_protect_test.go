package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// engagementctl status carries what queue-process last ran with (the
// order, the per-user cap, the pace) and Meta's verdict on the number
// (rating, tier, paused templates, when last read), from the database:
// what the run recorded and Meta's webhook wrote; the keys it had before
// are still there.
func TestStatusShowsOrderCapPaceAndTheNumbersHealth(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	env := cmdtest.Env("DATABASE_URL=" + url)

	res := cmdtest.Exec(t, ctl.NewCommand, env, "status", "--output", "json")
	var before map[string]json.RawMessage
	if err := json.Unmarshal([]byte(res.Stdout), &before); err != nil || string(before["queue_settings"]) != "[]" || string(before["number_health"]) != "[]" {
		t.Fatalf("status before any run: %v, queue_settings %s, number_health %s; want both []", err, before["queue_settings"], before["number_health"])
	}

	if res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--transport", "log", "--kind-priority", "goodbye,reminder,weekly_review",
		"--per-user-cap", "2", "--per-user-cap-window", "72h", "--send-interval", "2m", "--send-jitter", "1m",
		"--daily-limit", "300", "--spread-budget", "--quiet-hours", "21:00-08:00", "--timezone", "America/Sao_Paulo"); res.Code != 0 {
		t.Fatalf("queue-process: exit %d, stderr %s", res.Code, res.Stderr)
	}
	// What Meta's webhooks write (console/whatsapp_verdict_test.go sends
	// them): a number read once, a template paused.
	fixture.CtlNumberHealth(t, pool, fixture.NumberHealthRead{Transport: "whatsapp", Quality: "RED", Tier: "TIER_250",
		ReadAt: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), Source: "webhook"})
	fixture.CtlTemplateStatusAt(t, pool, "goodbye_v1", "DISABLED", time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC))
	fixture.CtlTemplateStatusAt(t, pool, "weekly_review_v1", "APPROVED", time.Date(2026, 11, 19, 9, 0, 0, 0, time.UTC))

	res = cmdtest.Exec(t, ctl.NewCommand, env, "status", "--output", "json")
	if res.Code != 0 {
		t.Fatalf("status --output json: exit %d, stderr %s", res.Code, res.Stderr)
	}
	var st struct {
		Queue    json.RawMessage `json:"queue"`
		Budgets  json.RawMessage `json:"budgets"`
		Settings []struct {
			Transport    string   `json:"transport"`
			KindPriority []string `json:"kind_priority"`
			MaxWait      float64  `json:"kind_priority_max_wait_seconds"`
			PerUserCap   int      `json:"per_user_cap"`
			Window       float64  `json:"per_user_cap_window_seconds"`
			Interval     float64  `json:"send_interval_seconds"`
			LeastGap     float64  `json:"least_gap_seconds"`
			Jitter       float64  `json:"send_jitter_seconds"`
			Spread       bool     `json:"spread_budget"`
			Waking       float64  `json:"waking_seconds"`
			Fits         *bool    `json:"pace_fits"`
			DailyLimit   int      `json:"daily_limit"`
			QuietHours   string   `json:"quiet_hours"`
			Timezone     string   `json:"timezone"`
			RecordedAt   time.Time
		} `json:"queue_settings"`
		Numbers []struct {
			Transport string                          `json:"transport"`
			Rating    string                          `json:"quality_rating"`
			Tier      string                          `json:"messaging_limit_tier"`
			Holding   bool                            `json:"holding_marketing"`
			ReadAt    *time.Time                      `json:"read_at"`
			Source    string                          `json:"source"`
			Paused    []string                        `json:"paused_templates"`
			Templates []struct{ Name, Status string } `json:"templates"`
		} `json:"number_health"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil || st.Queue == nil || st.Budgets == nil {
		t.Fatalf("status --output json: %v (queue %s, budgets %s); want one object with the keys it had", err, st.Queue, st.Budgets)
	}
	// 13 waking hours over 300 a day: 156 s on average, so 126 s at
	// least, plus up to 60 s.
	if len(st.Settings) != 1 {
		t.Fatalf("queue_settings %+v, want the log transport's", st.Settings)
	}
	s := st.Settings[0]
	if s.Transport != "log" || strings.Join(s.KindPriority, ",") != "goodbye,reminder,weekly_review" || s.MaxWait != 72*3600 ||
		s.PerUserCap != 2 || s.Window != 72*3600 || s.Interval != 120 || s.LeastGap != 126 || s.Jitter != 60 || !s.Spread ||
		s.Waking != 13*3600 || s.Fits == nil || !*s.Fits || s.DailyLimit != 300 || s.QuietHours != "21:00-08:00" || s.Timezone != "America/Sao_Paulo" {
		t.Errorf("queue_settings %+v, want what the run ran with", s)
	}
	if len(st.Numbers) != 1 || st.Numbers[0].Rating != "RED" || st.Numbers[0].Tier != "TIER_250" || !st.Numbers[0].Holding ||
		st.Numbers[0].Source != "webhook" || st.Numbers[0].ReadAt == nil || strings.Join(st.Numbers[0].Paused, ",") != "goodbye_v1" ||
		len(st.Numbers[0].Templates) != 2 || st.Numbers[0].Templates[0].Name != "goodbye_v1" {
		t.Errorf("number_health %+v, want RED at TIER_250 from the webhook, goodbye_v1 held first", st.Numbers)
	}

	res = cmdtest.Exec(t, ctl.NewCommand, env, "status")
	for _, want := range []string{
		"queue-process on log (as of ", "order goodbye, reminder, weekly_review, then the rest",
		"per-user cap: at most 2 marketing messages per user in any 3 days",
		"pace: a send every 2 min 6 s at least, plus up to 1 min at random; the day's budget spread over the 13 h of waking hours",
		"number on whatsapp: quality RED, messaging limit TIER_250; marketing kinds wait (quality); paused templates: goodbye_v1 (read 2026-11-20T10:00:00Z from webhook)",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("status does not say %q:\n%s", want, res.Stdout)
		}
	}
}
