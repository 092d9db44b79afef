// Package poolertest holds the end-to-end tests of every binary reached
// through a real PgBouncer in transaction mode (pgtest.NewPooledDatabase),
// the way production reaches PostgreSQL through PgBouncer or Supabase's
// Supavisor: the daily and weekly jobs, queue-process, engagementctl status,
// verify and migrate, concurrent runs and a run killed with SIGKILL.
package poolertest
