-- Opens a batch's transaction: holds the run's fence until the batch
-- commits, so that a later run can wait for (or cancel) it, and bounds the
-- batch's statements on the server for this transaction only (@timeout_ms,
-- e.g. '300000'; NULL keeps the session's own setting).
SELECT pg_advisory_xact_lock_shared(@fence_key),
       set_config('statement_timeout', coalesce(@timeout_ms::text, current_setting('statement_timeout')), true)
