package delivery

import (
	"encoding/json"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// sendRules is the claim's (and recheck.sql's) @kinds: each kind's send-time rule, as JSON.
var sendRules = func() string {
	type rule struct {
		SendWhile          []sm.State `json:"send_while"`
		CurrentGoodbyeOnly bool       `json:"current_goodbye_only"`
		ConfirmsOptOut     bool       `json:"confirms_opt_out"`
		// Capped: the per-user cap counts and holds it (the marketing
		// kinds; claim.sql).
		Capped bool `json:"capped"`
		// Category and Holdout feed engagement_refusal (migration 69):
		// the rule every door applies.
		Category sm.Category `json:"category"`
		Holdout  bool        `json:"holdout"`
	}
	rules := map[sm.Message]rule{}
	for _, k := range sm.Kinds() {
		rules[k.Message] = rule{k.SendWhile, k.CurrentGoodbyeOnly, k.ConfirmsOptOut, k.Category == sm.CategoryMarketing,
			k.Category, k.Holdout}
	}
	b, err := json.Marshal(rules)
	if err != nil {
		panic("delivery: encode the send rules: " + err.Error())
	}
	return string(b)
}()
