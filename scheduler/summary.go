package scheduler

import "github.com/engagement-scheduler/engagement"

// A job's summary and its parts are the root package's
// (engagement.JobSummary): internal/metrics and the commands read them
// without importing the job.
type (
	// Summary is what a job run did: engagement.JobSummary.
	Summary = engagement.JobSummary
	// Counts are a job's and each step's counters: engagement.Counts.
	Counts = engagement.Counts
	// Step is one step's name and counters: engagement.Step.
	Step = engagement.Step
	// Steps marshal in run order: engagement.Steps.
	Steps = engagement.Steps
	// UserError is one user's failure: engagement.UserError.
	UserError = engagement.UserError
	// MessageCounts are the queue inserts of one message type:
	// engagement.MessageCounts.
	MessageCounts = engagement.MessageCounts
)
