// Package engagement holds the types and values the application packages
// share, as wtf's root package does: what a job run and a delivery run
// report (JobSummary, DeliverySummary, their parts), the quiet hours (the
// queue step keeps them, the daily job schedules the user's hour around
// them), and the defaults more than one package judges by. It imports
// nothing of the module's, so that
// a package needing one of these reads it here instead of importing the
// package that produces it (issue 60: scheduler imported delivery for its
// queue step's summary, verify delivery and retention for a constant each,
// internal/metrics the job and delivery for their summaries).
// TestTheHouseReadsTopDown (internal/cli/layers_test.go) holds it there.
package engagement

import "time"

// DefaultClaimTimeout is how long a delivery claim lives before it counts
// as abandoned, unless queue-process's --claim-timeout says otherwise
// (delivery.ProcessorConfig.ClaimTimeout). verify's opt-out grace is one.
const DefaultClaimTimeout = 2 * time.Minute

// DefaultRetention is how long settled messages are kept by default
// (engagementctl cleanup --older-than); verify checks the cleanup kept it.
const DefaultRetention = 720 * time.Hour
