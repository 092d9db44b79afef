package funnel_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/funnel"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// The console's overview read the arms of 900 timed goodbyes in 15 s (60
// s with the race detector, past the browser test's minute): logged that
// day, the log was not analyzed yet, the planner took each step for one
// row, and put the answers' step, inlined, on the inner side of a nested
// loop over the goodbyes: run again for each, 160,000 times in all. The
// arms must cost what the goodbyes are, whatever the statistics: counted
// here in the rows the plan's nodes handle, right after the moves are
// logged, before any ANALYZE.
func TestTheArmsCostWhatTheGoodbyesAreBeforeAnyAnalyze(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	const n = 900
	at := time.Date(2026, 2, 24, 6, 0, 0, 0, time.UTC)
	var goodbyes, answers, returns []fixture.LoggedMove
	for i := range n {
		user := fixture.NamedID(fmt.Sprintf("arms:%d", i))
		goodbyes = append(goodbyes, fixture.LoggedMove{User: user, From: "active", To: "goodbye_sent", Trigger: "inactivity_14d",
			Timing: map[bool]string{true: "best_hour", false: "run_time"}[i%2 == 0], At: at})
		if i%5 == 0 {
			answers = append(answers, fixture.LoggedMove{User: user, From: "goodbye_sent", To: "help_flow",
				Trigger: "goodbye_answer_help", At: at.Add(2 * time.Hour)})
		}
		if i%4 == 1 {
			returns = append(returns, fixture.LoggedMove{User: user, From: "dormant", To: "active", Trigger: "user_message",
				At: at.AddDate(0, 0, 3)})
		}
	}
	fixture.LogMoves(t, pool, goodbyes)
	fixture.LogMoves(t, pool, answers)
	fixture.LogMoves(t, pool, returns)

	// Each step reads its rows once and meets the others by key: a few
	// dozen rows handled a goodbye. A step run again for each goodbye is
	// hundreds of thousands.
	const most = 40 * n
	if got := pgtest.RowsHandled(t, pool, funnel.ArmsStatement(at.AddDate(0, 0, 5), 8)); got > most {
		t.Errorf("the arms of %d goodbyes handled %d rows, want at most %d", n, got, most)
	} else {
		t.Logf("the arms of %d goodbyes handled %d rows", n, got)
	}
}
