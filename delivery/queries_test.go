package delivery

import (
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender"
)

// Every statement is EXPLAINed against a migrated database with the types
// and values the package passes, so one that no longer matches the schema
// fails here rather than in production.
func TestEveryQueryPlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	id := "00000000-0000-0000-0000-000000000001"
	quietStart, quietEnd, limit, perUser, factor := 21*time.Hour, 8*time.Hour, 10, 1, 2.0
	rating, tier, flagged, fits, quiet, zone := "GREEN", "TIER_2K", false, true, "21:00-08:00", "America/Sao_Paulo"
	pgtest.Explain(t,
		claimQuery.Bind(claimArgs{Holder: "h", ClaimTimeout: time.Minute, Batch: 10, DefaultLocale: sender.DefaultLocale,
			Timezone: "UTC", QuietStart: &quietStart, QuietEnd: &quietEnd, Kinds: sendRules,
			Transport: "webhook", SpendLimit: &limit, KindPriority: []string{"goodbye"}, PriorityMaxWait: 72 * time.Hour,
			PerUserCap: &perUser, CapWindow: 7 * 24 * time.Hour, QualityHold: true, PausedKeys: []string{"k"},
			VerdictRecheck: time.Hour, WindowMargin: &quietEnd, ReachoutWindow: &quietStart}),
		startQuery.Bind(startArgs{ID: id, Holder: "h", ClaimTimeout: time.Minute, Transport: "whatsapp",
			MetaCategory: "marketing", ClockOffset: time.Hour}),
		categoriesSaveQuery.Bind(categoriesSaveArgs{AccountID: "1", Names: []string{"t"}, Languages: []string{"pt_BR"},
			Categories: []string{"MARKETING"}, TemplateIDs: []string{""}}),
		categoriesReadQuery.Bind(sqlfile.None{}),
		settleQuery.Bind(settleArgs{IDs: []string{id}, Statuses: []string{"sent"}, ProviderIDs: []string{""},
			RetryIns: []time.Duration{0}, Errors: []string{""}, Attempted: []int{1}, InDoubt: []bool{false}, Spent: []bool{true}, Holder: "h",
			Transport: "webhook"}),
		holdQuery.Bind(holdArgs{Holder: "h", ClaimTimeout: time.Minute}),
		unholdQuery.Bind(unholdArgs{Holder: "h"}),
		releaseQuery.Bind(releaseArgs{IDs: []string{id}, Holder: "h"}),
		cancelDoubtedQuery.Bind(cancelDoubtedArgs{ID: id, Reason: "stale", Holder: "h"}),
		lookupStartQuery.Bind(lookupStartArgs{ID: id, Holder: "h", Transport: "webhook"}),
		recoverQuery.Bind(recoverArgs{Own: "h", Transport: "webhook", Deduplicates: true, Unknown: "x"}),
		ownClaimsQuery.Bind(ownClaimsArgs{Holder: "h"}),
		paceQuery.Bind(paceArgs{Transport: "webhook", Interval: time.Second, Jitter: time.Second}),
		floorLockQuery.Bind(floorLockArgs{Transport: "webhook"}),
		floorWaitQuery.Bind(floorWaitArgs{Transport: "webhook", Gap: time.Second}),
		floorRecordQuery.Bind(floorRecordArgs{Transport: "webhook"}),
		floorPromiseQuery.Bind(floorPromiseArgs{Hold: time.Second, Transport: "webhook", Holder: 1}),
		nextDueQuery.Bind(nextDueArgs{}),
		wishesStartQuery.Bind(sqlfile.None{}),
		wishesQuery.Bind(wishesArgs{Since: 1}),
		recheckQuery.Bind(recheckArgs{IDs: []string{id}, Holder: "h", Kinds: sendRules, ClockOffset: time.Hour, ReachoutWindow: &quietStart}),
		budgetCreateQuery.Bind(budgetCreateArgs{Transport: "webhook", DailyLimit: 10}),
		budgetLockQuery.Bind(budgetLockArgs{Transport: "webhook"}),
		budgetPruneQuery.Bind(budgetPruneArgs{Transport: "webhook", Window: BudgetWindow}),
		budgetStateQuery.Bind(budgetStateArgs{Transport: "webhook", Window: BudgetWindow}),
		budgetsQuery.Bind(budgetsArgs{Window: BudgetWindow}),
		budgetApplyQuery.Bind(budgetApplyArgs{IDs: []string{id}, Waited: []bool{true}, Holder: "h", Transport: "webhook",
			Window: BudgetWindow, DailyLimit: 10, Timezone: "UTC", QuietStart: &quietStart, QuietEnd: &quietEnd,
			KindPriority: []string{"goodbye"}}),
		budgetWaitingQuery.Bind(sqlfile.None{}),
		healthSaveQuery.Bind(healthSaveArgs{Transport: "whatsapp-cloud", Source: "graph_api",
			QualityRating: &rating, MessagingLimitTier: &tier, Flagged: &flagged}),
		healthReadQuery.Bind(healthReadArgs{Transport: "whatsapp-cloud"}),
		throughputQuery.Bind(throughputArgs{PhoneNumberID: "106540352242922", OnBizApp: &flagged}),
		settingsSaveQuery.Bind(settingsSaveArgs{Transport: "webhook", KindPriority: []string{"goodbye"},
			KindPriorityMaxWait: 72 * time.Hour, PerUserCap: 1, PerUserCapWindow: 7 * 24 * time.Hour,
			SendInterval: time.Minute, LeastGap: time.Minute, SendJitter: time.Minute, SpreadBudget: true,
			WakingHours: 13 * time.Hour, PaceFits: &fits, DailyLimit: 300, QuietHours: &quiet, Timezone: &zone}),
		settingsQuery.Bind(sqlfile.None{}),
		healthReportQuery.Bind(healthReportArgs{CloudTransport: "whatsapp"}),
		templatesQuery.Bind(templatesArgs{MaxTemplates: MaxTemplates}),
		budgetAdvanceQuery.Bind(budgetAdvanceArgs{Transport: "webhook", DailyLimit: 10}),
		budgetRefundQuery.Bind(budgetRefundArgs{Transport: "webhook", IDs: []string{id}, Claims: []int64{1},
			Counts: []int{1}, Recovered: true}),
		budgetOpenQuery.Bind(budgetOpenArgs{Transport: "webhook", Window: BudgetWindow, DailyLimit: 10,
			RampStart: &limit, RampFactor: &factor}),
		pauseRecordQuery.Bind(pauseRecordArgs{Transport: "webhook", Kind: "banned", StatusCode: 403,
			ClockOffset: time.Hour, Wait: time.Hour, Holder: "h"}),
		pauseActiveQuery.Bind(pauseActiveArgs{Transport: "webhook", ClockOffset: time.Hour}),
		pausesQuery.Bind(sqlfile.None{}),
		pauseClearQuery.Bind(pauseClearArgs{Transport: "webhook", ClearedBy: "operator"}),
	)
}
