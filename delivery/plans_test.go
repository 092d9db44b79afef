package delivery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender"
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
			statuses, providers, retries, errs, attempted, inDoubt := make([]string, n), make([]*string, n),
				make([]time.Duration, n), make([]*string, n), make([]int32, n), make([]bool, n)
			for i := range mine {
				statuses[i], attempted[i] = "sent", 1
			}
			statements := map[string]struct {
				sql  string
				args sqlfile.Args
			}{
				"claim": {claimSQL, sqlfile.Args{"holder": "h2", "claim_timeout": time.Minute, "batch": 400,
					"default_locale": sender.DefaultLocale, "timezone": "UTC", "quiet_start": nil, "quiet_end": nil,
					"kinds": sendRules, "clock_offset": time.Duration(0), "transport": "webhook", "spend_limit": nil,
					"kind_priority": []string{}, "priority_max_wait": 72 * time.Hour, "per_user_cap": nil, "cap_window": time.Hour,
					"quality_hold": false, "paused_keys": []string{}, "verdict_recheck": time.Hour}},
				"claim_by_kind": {claimSQL, sqlfile.Args{"holder": "h2", "claim_timeout": time.Minute, "batch": 400,
					"default_locale": sender.DefaultLocale, "timezone": "UTC", "quiet_start": nil, "quiet_end": nil,
					"kinds": sendRules, "clock_offset": time.Duration(0), "transport": "webhook", "spend_limit": nil,
					"kind_priority": []string{"goodbye", "weekly_review"}, "priority_max_wait": 72 * time.Hour,
					"per_user_cap": 2, "cap_window": 7 * 24 * time.Hour,
					"quality_hold": true, "paused_keys": []string{"engagement.goodbye.self_select"}, "verdict_recheck": time.Hour}},
				"settle": {settleSQL, sqlfile.Args{"ids": mine, "statuses": statuses, "provider_ids": providers,
					"retry_ins": retries, "errors": errs, "attempted": attempted, "in_doubt": inDoubt, "holder": "h",
					"transport": "webhook", "clock_offset": time.Duration(0)}},
				"recheck": {recheckSQL, sqlfile.Args{"ids": mine, "holder": "h", "kinds": sendRules}},
				"release": {releaseSQL, sqlfile.Args{"ids": mine, "holder": "h"}},
			}
			for name, s := range statements {
				plan := explain(t, pool, s.sql, s.args)
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
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		INSERT INTO user_profiles (user_id, whatsapp_jid)
		SELECT ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid, '55' || g || '@s.whatsapp.net'
		  FROM generate_series(1, 20000) g;
		INSERT INTO user_engagement_states (user_id, state, last_activity_at)
		SELECT user_id, 'active', now() FROM user_profiles`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		       destination_jid, scheduled_for, idempotency_key, status, sent_at, claimed_by, claimed_until)
		SELECT ('00000000-0000-0000-0000-' || lpad((g % 20000 + 1)::text, 12, '0'))::uuid, 'weekly_review',
		       'engagement.weekly_review.celebration', '{"count":"2"}', 'individual', '55@s.whatsapp.net',
		       now() - make_interval(mins => g % 5000), 'k' || g,
		       CASE WHEN g <= $1::int THEN 'pending' WHEN g <= $1 + $2 + $3 THEN 'processing' ELSE 'sent' END,
		       CASE WHEN g > $1 + $2 + $3 THEN now() - interval '1 day' END,
		       CASE WHEN g > $1 AND g <= $1 + $2 THEN 'h' WHEN g > $1 + $2 AND g <= $1 + $2 + $3 THEN 'other' END,
		       CASE WHEN g > $1 AND g <= $1 + $2 + $3 THEN now() + interval '1 minute' END
		  FROM generate_series(1, $1::int + $2::int + $3::int + $4::int) g`, pending, mine, others, history); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT id::text FROM engagement_message_queue WHERE claimed_by = 'h' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// explain is sql's plan with args, as text (EXPLAIN without ANALYZE
// runs nothing).
func explain(t *testing.T, pool *pgxpool.Pool, sql string, args sqlfile.Args) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "EXPLAIN "+sql, args)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
