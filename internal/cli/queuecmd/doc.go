// Package queuecmd is queue-process's command: its flags, the run of
// package delivery's processor with its run record and metrics, and its
// summary. Its delivery flags (DeliveryFlags: the transport, its own flags
// from the transports' kinds in transports.go, the pace, the budget) are the daily and
// weekly jobs' trailing queue step too, which internal/cli/jobcmd
// registers from here. It is a package of its own so that engagementctl
// and the console do not link the transports' command side.
package queuecmd
