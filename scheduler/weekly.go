package scheduler

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/activity"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// WeeklyJob is the weekly job's name.
const WeeklyJob = "engagement-weekly"

// RunWeekly queues one celebratory weekly review for every user who was
// active in the 7 days up to the as-of instant (a transaction or bot
// activity), in state active or help_flow. The review carries the user's
// transaction count in the window ({"count":"3"}) and the idempotency key
// {userId}:weekly_review:{ISO week of the as-of instant}, so a user gets at
// most one review per ISO week however often the job runs. States are not
// changed. Opted-out users and users with no destination are skipped.
func RunWeekly(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	asOf := cfg.AsOf.UTC()
	sum := &Summary{Job: WeeklyJob, AsOf: asOf, ISOWeek: review.Period.Label(asOf), DryRun: cfg.DryRun, Errors: []UserError{}}
	err := runJob(ctx, pool, WeeklyJob, []step{weeklyReviewStep(asOf)}, cfg, sum)
	return sum, err
}

// review is the weekly review's kind: the weekly job's message.
var review, _ = sm.KindOf(sm.WeeklyReviewMessage)

// weeklyReviewStep queues the reviews of a chunk's users in one statement
// (queries/weekly_review.sql), as of asOf (UTC): the users in the states a
// review may be sent in, active in the week that ends at asOf
// (activity.WindowStart), under the key of asOf's ISO week, covering that
// week. Its dry run is the same statement with @dry_run, over the whole
// table.
//
// The review locks no row: states and profiles are only read, and the
// queue has no foreign key, so a user whose rows the bot holds is reviewed
// without waiting. (The one wait left is another transaction inserting the
// same review key and not yet committed: only another run of the week
// does that, and runs take turns.)
func weeklyReviewStep(asOf time.Time) step {
	week, weekEnd := review.Period.Bounds(asOf)
	return step{
		name:        "weekly_review",
		messageType: string(review.Message),
		move: moveBy(weeklyReviewQuery, func(m moveArgs) weeklyReviewArgs {
			return weeklyReviewArgs{
				AsOf: asOf, WindowStart: activity.WindowStart(asOf),
				// The users a review is for are those it may be sent to.
				States:      stateNames(review.SendWhile),
				MessageType: string(review.Message), MessageKey: review.CatalogKey,
				KeySuffix: review.KeySuffix(asOf), PeriodStart: week, ReplayUntil: weekEnd,
				First: m.first, End: m.end, ShardIndex: m.shardIndex, ShardCount: m.shardCount,
				RunID: m.runID, DryRun: m.dryRun, LogDuplicates: m.logDuplicates,
			}
		}),
	}
}

// stateNames is states as the statements take them, text.
func stateNames(states []sm.State) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}
