package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// ReadQueue reads the backlog's three figures from their named columns:
// three reviews due a minute ago add three pending, three due, and an
// oldest due age of at least that minute.
func TestReadQueueCountsTheDueBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := pgtest.NewTx(t)
	before, err := metrics.ReadQueue(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	fixture.DueReviews(t, tx, 3, "backlog")
	after, err := metrics.ReadQueue(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Pending - before.Pending; got != 3 {
		t.Errorf("pending grew by %d, want 3", got)
	}
	if got := after.Due - before.Due; got != 3 {
		t.Errorf("due grew by %d, want 3", got)
	}
	if after.OldestDueAge < 59*time.Second {
		t.Errorf("oldest due age %s, want at least the minute the reviews have waited", after.OldestDueAge)
	}
}
