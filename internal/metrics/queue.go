package metrics

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// Queue is the delivery queue's backlog after a queue-process run: what
// the backlog alerts watch.
type Queue struct {
	Pending      int64         // pending messages, due or not
	Due          int64         // pending messages whose scheduled_for has come
	OldestDueAge time.Duration // how long the oldest due message has waited; 0 when none is due
}

//go:embed queries/queue_backlog.sql
var queueBacklogSQL string

// Querier is a pgx pool, connection or transaction.
type Querier = postgres.Querier

// ReadQueue reads the queue's backlog, by the database clock, in one
// statement (an index-only count of the pending rows).
func ReadQueue(ctx context.Context, q Querier) (Queue, error) {
	var qs Queue
	var age float64
	if err := q.QueryRow(ctx, queueBacklogSQL).Scan(&qs.Pending, &qs.Due, &age); err != nil {
		return Queue{}, fmt.Errorf("read the queue backlog: %w", err)
	}
	qs.OldestDueAge = time.Duration(age * float64(time.Second))
	return qs, nil
}
