package funnel

import (
	"time"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// ArmsStatement is the statement Read runs for weeks up to asOf.
func ArmsStatement(asOf time.Time, weeks int) sqlfile.Bound {
	return funnelArmsQuery.Bind(armsArgs(asOf, weeks))
}
