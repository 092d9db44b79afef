package delivery

import (
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender"
)

// Every statement file is EXPLAINed against a migrated database, so one
// that no longer matches the schema fails here rather than in production.
func TestEveryQueryPlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	id := "00000000-0000-0000-0000-000000000001"
	budget := sqlfile.Args{"transport": "webhook", "clock_offset": time.Duration(0), "window": BudgetWindow}
	pgtest.ExplainAll(t, queryFiles, map[string]sqlfile.Args{
		"claim": {"holder": "h", "claim_timeout": time.Minute, "batch": 10, "default_locale": sender.DefaultLocale,
			"timezone": "UTC", "quiet_start": 21 * time.Hour, "quiet_end": 8 * time.Hour, "kinds": sendRules,
			"clock_offset": time.Duration(0), "transport": "webhook", "spend_limit": 10,
			"kind_priority": []string{"goodbye"}, "priority_max_wait": 72 * time.Hour, "per_user_cap": 1, "cap_window": 7 * 24 * time.Hour,
			"quality_hold": true, "paused_keys": []string{"k"}, "verdict_recheck": time.Hour},
		"start": {"id": id, "holder": "h", "claim_timeout": time.Minute, "transport": "webhook"},
		"settle": {"ids": []string{id}, "statuses": []string{"sent"}, "provider_ids": []*string{nil},
			"retry_ins": []time.Duration{0}, "errors": []*string{nil}, "attempted": []int32{1}, "in_doubt": []bool{false}, "holder": "h", "transport": "webhook",
			"clock_offset": time.Duration(0)},
		"hold":          {"holder": "h", "claim_timeout": time.Minute},
		"unhold":        {"holder": "h"},
		"release":       {"ids": []string{id}, "holder": "h"},
		"recover":       {"own": "h", "transport": "webhook", "deduplicates": true, "unknown": "x"},
		"pace":          {"transport": "webhook", "interval": time.Second, "jitter": time.Second},
		"next_due":      {"clock_offset": time.Duration(0)},
		"recheck":       {"ids": []string{id}, "holder": "h", "kinds": sendRules},
		"budget_create": {"transport": "webhook", "daily_limit": 10},
		"budget_lock":   {"transport": "webhook"},
		"budget_prune":  budget,
		"budget_state":  budget,
		"budgets":       {"window": BudgetWindow},
		"budget_apply": {"ids": []string{id}, "waited": []bool{true}, "holder": "h", "transport": "webhook", "clock_offset": time.Duration(0),
			"window": BudgetWindow, "daily_limit": 10, "timezone": "UTC", "quiet_start": 21 * time.Hour, "quiet_end": 8 * time.Hour,
			"kind_priority": []string{"goodbye"}},
		"budget_waiting": {},
		"health_save": {"transport": "whatsapp-cloud", "clock_offset": time.Duration(0), "source": "graph_api",
			"quality_rating": "GREEN", "messaging_limit_tier": "TIER_2K", "flagged": false},
		"health_read": {"transport": "whatsapp-cloud"},
		"settings_save": {"transport": "webhook", "kind_priority": []string{"goodbye"}, "kind_priority_max_wait": 72 * time.Hour,
			"per_user_cap": 1, "per_user_cap_window": 7 * 24 * time.Hour, "send_interval": time.Minute, "least_gap": time.Minute,
			"send_jitter": time.Minute, "spread_budget": true, "waking_hours": 13 * time.Hour, "pace_fits": true, "daily_limit": 300,
			"daily_limit_auto": false, "quiet_hours": "21:00-08:00", "timezone": "America/Sao_Paulo", "clock_offset": time.Duration(0)},
		"settings":       {},
		"health_report":  {"cloud_transport": "whatsapp"},
		"templates":      {"max_templates": MaxTemplates},
		"budget_advance": {"transport": "webhook", "clock_offset": time.Duration(0), "daily_limit": 10},
		"budget_refund":  {"transport": "webhook", "ids": []string{id}, "claims": []int64{1}, "counts": []int32{1}, "recovered": true},
		"budget_open": {"transport": "webhook", "clock_offset": time.Duration(0), "window": BudgetWindow, "daily_limit": 10,
			"ramp_start": 100, "ramp_factor": 2.0},
	})
}
