-- Opens a batch's transaction: holds the run's fence until the batch
-- commits, so that a later run can wait for (or cancel) it, and bounds the
-- batch's statements on the server for this transaction only (@timeout_ms,
-- e.g. '300000'; NULL keeps the session's own setting). It also plans the
-- batch for its own parameters: a pool that prepares statements (pgx's
-- default mode) would otherwise get a generic plan after five batches, one
-- that cannot see a chunk's page range and joins its rows in nested loops
-- (170 ms became 2.4 s for a chunk of 1,500 users). And it is not
-- JIT-compiled: at PostgreSQL's default jit = on every chunk's statement was
-- compiled anew, 15-30 ms of a 65-100 ms statement, where a single
-- statement over every user compiles once (the weekly job: 0.86x its
-- reference at 1M users with JIT, 0.70x without).
-- nullable: @timeout_ms
SELECT pg_advisory_xact_lock_shared(@fence_key),
       set_config('statement_timeout', coalesce(@timeout_ms::text, current_setting('statement_timeout')), true) AS statement_timeout,
       set_config('plan_cache_mode', 'force_custom_plan', true) AS plan_cache_mode,
       set_config('jit', 'off', true) AS jit
