// Package jobcmd is the commands of engagement-daily and engagement-weekly:
// their flags (sharding, analytics, the trailing queue step's), the run of
// the job in package scheduler, and its summary. It is a package of its own
// so that queue-process does not link what only the jobs run (the
// analytics events).
package jobcmd
