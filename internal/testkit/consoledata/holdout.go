package consoledata

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

//go:embed queries/*.sql
var queryFiles embed.FS

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
	err = pool.QueryRow(ctx, sqlfile.Must(queryFiles, "holdout"), sqlfile.Args{
		"basis_points":    h.BasisPoints(),
		"salt":            scheduler.DefaultHoldoutSalt,
		"goodbye_trigger": string(sm.Inactivity14d),
		"goodbye_type":    string(sm.GoodbyeMessage),
	}).Scan(&held, &removed)
	if err != nil {
		return 0, 0, fmt.Errorf("consoledata: hold out %v %%: %w", percent, err)
	}
	return held, removed, nil
}
