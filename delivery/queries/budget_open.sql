-- Set @transport's budget as a processor starts with it: its limit and
-- warm-up ramp (for engagementctl status and the console), the ramp's first
-- day (kept while the ramp is unchanged; now, on the processor's clock,
-- @clock_offset ahead of the database's, when it starts or changes), and
-- used counted afresh from the slots spent in the window. Runs after
-- budget_create.sql, budget_lock.sql and budget_prune.sql, in their
-- transaction: nothing out of the window is left for a later prune to
-- count off again. Returns the ramp's first day, the processor's clock and
-- the slots spent in the window.
--
-- nullable: @ramp_start, @ramp_factor
UPDATE engagement_send_budgets b
   SET daily_limit = @daily_limit::int,
       ramp_started_at = CASE WHEN @ramp_start::int IS NULL THEN NULL
                              WHEN b.ramp_start IS NOT DISTINCT FROM @ramp_start::int
                               AND b.ramp_factor IS NOT DISTINCT FROM @ramp_factor::numeric
                               AND b.ramp_started_at IS NOT NULL
                              THEN b.ramp_started_at
                              ELSE now() + @clock_offset::interval END,
       ramp_start = @ramp_start::int,
       ramp_factor = @ramp_factor::numeric,
       used = (SELECT count(*)
                 FROM engagement_send_budget_recipients r
                WHERE r.transport = @transport
                  AND r.spent_at > now() + @clock_offset::interval - @window::interval)
            + (SELECT coalesce(sum(c.recipients), 0)
                 FROM engagement_send_budget_claims c
                WHERE c.transport = @transport
                  AND c.spent_at > now() + @clock_offset::interval - @window::interval),
       configured_at = now()
 WHERE b.transport = @transport
RETURNING b.ramp_started_at, now() + @clock_offset::interval AS clock_at, b.used;
