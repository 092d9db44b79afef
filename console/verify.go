package console

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/verify"
)

// Verify is the verify page: engagementctl verify's report.
type Verify struct {
	*verify.Report
}

func (s *server) verify(ctx context.Context, src source) (Verify, error) {
	var out Verify
	err := src.read(ctx, func(tx pgx.Tx, asOf time.Time) error {
		rep, err := verify.RunTx(ctx, tx, verify.Config{AsOf: asOf})
		out.Report = rep
		return err
	})
	return out, err
}
