package delivery

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// The lazy commit of a pipelined batch applies to the statement after it,
// ends with the batch, and makes the server say nothing: the binaries'
// `SET LOCAL synchronous_commit = off` wrote a WARNING into the server's
// log for every pace reservation and batched record (issue 24).
func TestLazyCommitAppliesToItsBatchWithoutAWarning(t *testing.T) {
	t.Parallel()
	_, url := pgtest.NewPool(t)
	ctx := context.Background()
	var notices []string
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DefaultQueryExecMode = mode // as postgres.Open sets it, direct or through a pooler
		// The session's own setting, whatever the server's default: the
		// throwaway cluster the test kit starts runs with it off (issue
		// 31 saw this test fail on every fresh machine).
		cfg.RuntimeParams["synchronous_commit"] = "on"
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Severity+": "+n.Message) }
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b := &pgx.Batch{}
		b.Queue(lazyCommitSQL)
		inBatch := fixture.QueueSetting(b, "synchronous_commit")
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		inside, after := inBatch(), fixture.Setting(t, conn, "synchronous_commit")
		_ = conn.Close(ctx)
		if inside != "off" || after != "on" {
			t.Errorf("mode %v: synchronous_commit %q in the batch, %q after it; want off, then on", mode, inside, after)
		}
	}
	if len(notices) > 0 {
		t.Errorf("the server said %q; want nothing", notices)
	}
}
