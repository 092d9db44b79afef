// Package idempotency remembers keys for a while, so that an operation keyed
// by its input runs once however often that input arrives: the jobs, the bot
// (a Go program imports this package) and operators share it.
//
// # Stores
//
// A Store records keys (Check), and optionally a result per key
// (StoreResult, GetResult). Check is atomic: of any number of concurrent
// Checks of one new key exactly one reports it new. Two implementations:
//
//   - Postgres (NewPostgres, spec "postgres"): table
//     engagement_idempotency_keys (migration 000004). Check is one
//     INSERT ... ON CONFLICT statement; an expired row is reused in place, so
//     correctness never depends on a cleanup. DeleteExpired removes expired
//     rows in batches to keep the table small (run it from a cron). Expiry is
//     computed from Options.Now, never from the database clock. Use it when
//     the keyed operation writes to the same database (the jobs): nothing
//     else to run, keys survive restarts and backups, and a key can be
//     inspected with SQL.
//   - Redis (NewRedis, spec "redis://host:port/db"): SET <prefix><key> NX PX
//     ttl, the result under "<prefix><key>:result"; expiry is Redis's own.
//     Use it for hot paths with many keys and no database transaction to
//     join (the bot's incoming webhooks), where a lost key (Redis restarted
//     without persistence) is acceptable.
//
// ParseStore builds either from a configuration string.
//
// # Prefix
//
// Every key is stored as Options.Prefix + key (default DefaultPrefix,
// "idempotency:"). Give each caller its own prefix ("bot:webhook:",
// "jobs:daily:") so their keys cannot collide, and so an operator can find
// or delete one caller's keys (WHERE key LIKE 'bot:%', SCAN bot:*).
//
// # TTL
//
// A key is remembered for the ttl passed to Check (Options.TTL, default
// DefaultTTL = 24 h, when ttl <= 0). After that it is new again. Pick a TTL
// longer than the longest time a duplicate can arrive after the original
// (the sender's retries, a re-run of a missed day): past it, a duplicate runs
// again. A result lives as long as its key.
//
// # Fail modes
//
// When the store is unreachable (the connection is refused, the network
// fails, or the store does not answer within Options.Timeout):
//
//   - FailClosed (the default) returns the error, wrapped as
//     "idempotency store: ...". The caller does not run the operation and
//     retries later. Use it when a duplicate is worse than a delay: sending
//     a message, charging, anything a user sees twice.
//   - FailOpen logs a warning and carries on as if the key were new: Check
//     returns (true, nil), StoreResult does nothing, GetResult finds
//     nothing. Use it when a missed operation is worse than an occasional
//     duplicate and the operation is harmless to repeat (marking a message
//     read, refreshing a cache).
//
// Other errors (a missing table, a cancelled context) are returned in both
// modes. Warnings never log a key or a value: only the prefix and the first
// 12 hex digits of the key's SHA-256.
//
// # Wrap
//
// Wrap makes a handler idempotent: the first call with a key runs it and
// stores its result (JSON); a duplicate returns that result without running
// it; a duplicate that arrives while the first run is still going gets
// ErrInProgress. A failed (or panicking) run forgets its key, so a retry
// runs again.
package idempotency
