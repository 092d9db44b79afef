package delivery

import (
	"embed"
	"encoding/json"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// The package's statements, one complete statement per file, so a reader
// can paste any of them into psql. queries_test.go EXPLAINs each against a
// migrated database with realistic arguments (and internal/sqlfile's test
// every package's).
//
//go:embed queries/*.sql
var queryFiles embed.FS

var (
	claimSQL   = mustQuery("claim")
	startSQL   = mustQuery("start")
	settleSQL  = mustQuery("settle")
	holdSQL    = mustQuery("hold")
	unholdSQL  = mustQuery("unhold")
	releaseSQL = mustQuery("release")
	recoverSQL = mustQuery("recover")
	paceSQL    = mustQuery("pace")
	nextDueSQL = mustQuery("next_due")
	recheckSQL = mustQuery("recheck")

	healthSaveSQL = mustQuery("health_save")
	healthReadSQL = mustQuery("health_read")

	settingsSaveSQL = mustQuery("settings_save")
	settingsSQL     = mustQuery("settings")
	healthReportSQL = mustQuery("health_report")
	templatesSQL    = mustQuery("templates")

	budgetCreateSQL  = mustQuery("budget_create")
	budgetLockSQL    = mustQuery("budget_lock")
	budgetOpenSQL    = mustQuery("budget_open")
	budgetPruneSQL   = mustQuery("budget_prune")
	budgetRefundSQL  = mustQuery("budget_refund")
	budgetStateSQL   = mustQuery("budget_state")
	budgetsSQL       = mustQuery("budgets")
	budgetAdvanceSQL = mustQuery("budget_advance")
	budgetApplySQL   = mustQuery("budget_apply")
	budgetWaitingSQL = mustQuery("budget_waiting")
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
	}
	rules := map[sm.Message]rule{}
	for _, k := range sm.Kinds() {
		rules[k.Message] = rule{k.SendWhile, k.CurrentGoodbyeOnly, k.ConfirmsOptOut, k.Category == sm.CategoryMarketing}
	}
	b, err := json.Marshal(rules)
	if err != nil {
		panic("delivery: encode the send rules: " + err.Error())
	}
	return string(b)
}()

// mustQuery is the statement in queries/<name>.sql.
func mustQuery(name string) string { return sqlfile.Must(queryFiles, name) }
