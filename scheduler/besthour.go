package scheduler

import (
	"math"
	"time"

	"github.com/engagement-scheduler/engagement"
)

// BestHourSalt is the salt of the best-hour split (engagement-daily
// --best-hour-percent): a user is in the best-hour arm when
// engagement_holdout_bucket(BestHourSalt, user_id) is below the percent
// times 100; a hash of the user id of its own, apart from the holdout's
// and the copy variants', so the arms and the holdout cut across each
// other. Fixed: the same users are in the same arm run after run, in every
// process and shard.
const BestHourSalt = "engagement-best-hour-1"

// BestHour is the user's hour (issue 61, docs/timing.md): each goodbye of
// a user in the best-hour arm is due at the start of the hour of day, in
// the user's zone, at which they wrote to the bot most often
// (engagement_fire's histogram, migration 85), when they wrote at least 3
// times in the 90 days before the run: the next time that hour starts
// within 24 hours of the run's as-of (or the as-of itself inside the
// hour), unless it falls in the quiet hours. Every other goodbye is due at
// the run's time. The zero value is off: no arm is recorded.
type BestHour struct {
	// On makes the run schedule by the user's hour and record each
	// goodbye's arm on its move (engagement_state_transitions.timing).
	On bool
	// Percent is the share of users in the best-hour arm, 0 to 100, to a
	// hundredth of a percent (100 with --best-hour alone); the others are
	// in the run-time arm.
	Percent float64
	// QuietHours and Timezone are the queue step's (--quiet-hours,
	// --timezone): an hour inside them is no best hour, and Timezone is
	// the zone they are read in for a user without a usable one of their
	// own, as the claim reads them.
	QuietHours engagement.QuietHours
	Timezone   string
}

// Validate reports a percent out of range.
func (b BestHour) Validate() error { return checkPercent("best-hour", b.Percent) }

// basisPoints is the statement's @best_hour_basis_points: Percent in
// hundredths of a percent, or -1 when off (no arm, no timing logged).
func (b BestHour) basisPoints() int {
	if !b.On {
		return -1
	}
	return int(math.Round(b.Percent * 100))
}

// quiet is the statement's @quiet_start and @quiet_end: nil when unset.
func (b BestHour) quiet() (start, end *time.Duration) {
	if !b.QuietHours.Set() {
		return nil, nil
	}
	return &b.QuietHours.Start, &b.QuietHours.End
}

// timezone is the statement's @timezone: UTC when unset, as the claim's.
func (b BestHour) timezone() string {
	if b.Timezone == "" {
		return "UTC"
	}
	return b.Timezone
}
