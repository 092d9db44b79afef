// Package ctl is engagementctl: the schema migrations and the operators'
// commands (enqueue, cleanup, status, verify, requeue, cancel, seed, smoke,
// check-receiver). It is a package of its own, on internal/cli's runner and
// flags, so that the jobs and queue-process do not link what only these
// commands run (verify, status, repair, the seeder).
package ctl
