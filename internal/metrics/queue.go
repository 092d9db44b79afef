package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// Queue is the delivery queue's backlog after a queue-process run: what
// the backlog alerts watch.
type Queue struct {
	Pending      int64         // pending messages, due or not
	Due          int64         // pending messages whose scheduled_for has come
	OldestDueAge time.Duration // how long the oldest due message has waited; 0 when none is due
}

// Querier is a pgx pool, connection or transaction.
type Querier = postgres.Querier

// ReadQueue reads the queue's backlog, by the database clock, in one
// statement (an index-only count of the pending rows).
func ReadQueue(ctx context.Context, q Querier) (Queue, error) {
	r, err := queueBacklogQuery.One(ctx, q, sqlfile.None{})
	if err != nil {
		return Queue{}, fmt.Errorf("read the queue backlog: %w", err)
	}
	return Queue{Pending: r.Pending, Due: r.Due, OldestDueAge: time.Duration(r.OldestDueAgeSeconds * float64(time.Second))}, nil
}
