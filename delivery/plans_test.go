package delivery

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// The statements a delivery runs for every batch must cost what the batch
// holds, not what the queue has ever held: a queue keeps its sent
// messages (retention deletes them after weeks), so a statement that
// reads the whole table slows every claim as the history grows. Planned
// here against a queue with a long history, many users and other
// processes' claims, after ANALYZE, as a production database is: no
// statement may scan the queue, the profiles or the states whole.
//
// (A claim once joined its update to the claimed rows by hashing every row
// of the queue: 39 ms for 400 messages at 20,000 rows, and growing.)
func TestHotStatementsReadWhatTheBatchHolds(t *testing.T) {
	t.Parallel()
	for _, q := range []struct {
		name                           string
		pending, mine, others, history int
	}{
		{"a long history", 400, 400, 1600, 57600},
		{"a backlog", 20000, 400, 0, 0},
	} {
		t.Run(q.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			mine := seedQueueShape(t, pool, q.pending, q.mine, q.others, q.history)
			n := len(mine)
			statuses, providers, retries, errs, attempted, inDoubt := make([]string, n), make([]string, n),
				make([]time.Duration, n), make([]string, n), make([]int, n), make([]bool, n)
			for i := range mine {
				statuses[i], attempted[i] = "sent", 1
			}
			perUser, reach := 2, DefaultReachoutWindow
			statements := map[string]sqlfile.Bound{
				"claim": claimQuery.Bind(claimArgs{Holder: "h2", ClaimTimeout: time.Minute, Batch: 400,
					DefaultLocale: sender.DefaultLocale, Timezone: "UTC",
					Kinds: sendRules, ClockOffset: 0, Transport: "webhook",
					KindPriority: []string{}, PriorityMaxWait: 72 * time.Hour, CapWindow: time.Hour,
					QualityHold: false, PausedKeys: []string{}, VerdictRecheck: time.Hour}),
				"claim_by_kind": claimQuery.Bind(claimArgs{Holder: "h2", ClaimTimeout: time.Minute, Batch: 400,
					DefaultLocale: sender.DefaultLocale, Timezone: "UTC",
					Kinds: sendRules, ClockOffset: 0, Transport: "webhook",
					KindPriority: []string{"goodbye", "weekly_review"}, PriorityMaxWait: 72 * time.Hour,
					PerUserCap: &perUser, CapWindow: 7 * 24 * time.Hour,
					QualityHold: true, PausedKeys: []string{"engagement.goodbye.self_select"}, VerdictRecheck: time.Hour,
					ReachoutWindow: &reach}),
				"settle": settleQuery.Bind(settleArgs{IDs: mine, Statuses: statuses, ProviderIDs: providers,
					RetryIns: retries, Errors: errs, Attempted: attempted, InDoubt: inDoubt, Holder: "h",
					Transport: "webhook", ClockOffset: 0}),
				"recheck": recheckQuery.Bind(recheckArgs{IDs: mine, Holder: "h", Kinds: sendRules, ReachoutWindow: &reach}),
				"release": releaseQuery.Bind(releaseArgs{IDs: mine, Holder: "h"}),
			}
			for name, s := range statements {
				plan := explain(t, pool, s)
				for _, table := range []string{"engagement_message_queue", "user_profiles", "user_engagement_states"} {
					if strings.Contains(plan, "Seq Scan on "+table) {
						t.Errorf("%s.sql reads all of %s:\n%s", name, table, plan)
					}
				}
			}
		})
	}
}

// seedQueueShape gives 20,000 users a queue of pending due messages,
// messages claimed by holder "h" (mine, whose ids it returns) and by
// another holder, and sent ones, then ANALYZEs, as autovacuum would have.
func seedQueueShape(t *testing.T, pool *pgxpool.Pool, pending, mine, others, history int) []string {
	t.Helper()
	const users = 20000
	fixture.NumberedUsers(t, pool, users)
	fixture.QueueShape(t, pool, fixture.Shape{Users: users, Pending: pending, Mine: mine, Others: others, History: history})
	fixture.Analyze(t, pool)
	return fixture.ClaimedBy(t, pool, "h")
}

// explain is s's plan, as text (EXPLAIN without ANALYZE runs nothing).
func explain(t *testing.T, pool *pgxpool.Pool, s sqlfile.Bound) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "EXPLAIN "+s.SQL, s.Args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// Issue 59: the check before a send (recheck.sql) took 240 ms for a batch
// of 400 in the bench, the database's busiest statement by far, and the
// record of the outcomes (settle.sql) 73 ms to find its 91 rows: the queue
// was analyzed while all of it was pending (as a backlog is, by autovacuum
// or the bench's VACUUM ANALYZE), so the planner took the processing
// index for one row, and read every row every process had claimed to find
// the batch's (the check once for the batch and once per message checked).
// The batch must be read by its primary key whatever the statistics say.
func TestTheBatchIsReadByKeyWhateverTheStatistics(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	seedQueueShape(t, pool, 4400, 0, 0, 40000) // analyzed: none claimed
	// Then the claims, unanalyzed: 400 by "h", 4,000 by another process.
	fixture.ClaimPending(t, pool, 400)
	mine := fixture.ClaimedBy(t, pool, "h")
	reach := DefaultReachoutWindow
	n := len(mine)
	statuses, none, retries, attempted, flags := make([]string, n), make([]string, n), make([]time.Duration, n), make([]int, n), make([]bool, n)
	for i := range mine {
		statuses[i], attempted[i] = "sent", 1
	}
	// Every scan of the queue: a sequential one, or one through an index
	// ("Index Scan using <index> on", "Bitmap Index Scan on <index>").
	scans := regexp.MustCompile(`Seq Scan on engagement_message_queue|Index (?:Only )?Scan using (\w+) on engagement_message_queue|Bitmap Index Scan on (\w+)`)
	for name, s := range map[string]sqlfile.Bound{
		"recheck": recheckQuery.Bind(recheckArgs{IDs: mine, Holder: "h", Kinds: sendRules, ReachoutWindow: &reach}),
		"settle": settleQuery.Bind(settleArgs{IDs: mine, Statuses: statuses, ProviderIDs: none, RetryIns: retries,
			Errors: none, Attempted: attempted, InDoubt: flags, Spent: flags, Holder: "h", Transport: "webhook"}),
	} {
		plan := explain(t, pool, s)
		for _, m := range scans.FindAllStringSubmatch(plan, -1) {
			if index := m[1] + m[2]; index != "engagement_message_queue_pkey" {
				t.Errorf("%s.sql reads the queue other than by its primary key (%s):\n%s", name, m[0], plan)
				break
			}
		}
	}
}

// Issue 59: a claim of 400 read 19,600 rows for the 400 it took, in the
// bench's every claim. The queue's statistics were older than its backlog
// (as a production queue's are, after the daily job queued its goodbyes:
// autovacuum analyzes a table only once a tenth of it changed), so the
// planner took the due messages for a few dozen, read them all through a
// bitmap and sorted them to take the oldest: a run over a backlog of n
// read n² / 400 rows. A claim must read what it takes, whatever the
// statistics say: counted here in the rows its plan handles (not timed),
// as the processor sends it, right after the backlog was queued.
func TestAClaimReadsWhatItTakesWhateverTheStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewPool(t)
	const backlog = 20_000
	fixture.DueReviews(t, pool, backlog, fixture.NewID())
	hook, err := transport.NewWebhook(transport.WebhookConfig{URL: "http://127.0.0.1:9/never", Secret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProcessor(pool, ProcessorConfig{Transport: hook, SendInterval: -1, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, claimPlanSQL); err != nil { // as readClaim sends it
		t.Fatal(err)
	}
	// The claim's thirty-odd steps each handle the batch's rows about once:
	// 34 rows a message claimed. Reading the backlog is 100 more here.
	most := int64(40 * p.cfg.ClaimBatch)
	got := pgtest.RowsHandled(t, tx, p.claimQuery.Bind(p.newRun(func(error) {}).claimArgs()))
	if got > most {
		t.Errorf("a claim of %d from a backlog of %d nobody analyzed handled %d rows, want at most %d", p.cfg.ClaimBatch, backlog, got, most)
	} else {
		t.Logf("a claim of %d from a backlog of %d handled %d rows", p.cfg.ClaimBatch, backlog, got)
	}
}
