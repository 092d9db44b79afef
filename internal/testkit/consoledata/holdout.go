package consoledata

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// HoldOut makes a seeded history one of a daily job run with
// --holdout-percent percent (the default salt) and two goodbye variants,
// a and b (queries/holdout.sql): the held-out goodbyes' log rows say so
// and their messages leave the queue, the others carry their variant. It
// returns how many goodbyes it held out and how many messages it removed.
// Seed does not call it: Sizes.Messages stays exact without it.
func HoldOut(ctx context.Context, pool *pgxpool.Pool, percent float64) (held, removed int64, err error) {
	h := scheduler.Holdout{Percent: percent}
	if err := h.Validate(); err != nil {
		return 0, 0, err
	}
	row, err := holdoutQuery.One(ctx, pool, holdoutArgs{
		BasisPoints:    h.BasisPoints(),
		Salt:           scheduler.DefaultHoldoutSalt,
		GoodbyeTrigger: string(sm.Inactivity14d),
		GoodbyeType:    string(sm.GoodbyeMessage),
	})
	if err != nil {
		return 0, 0, fmt.Errorf("consoledata: hold out %v %%: %w", percent, err)
	}
	return row.Held, row.Removed, nil
}
