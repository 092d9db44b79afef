-- Drop the slots out of @transport's window (spent @window or more before
-- now, on the processor's clock: @clock_offset ahead of the database's),
-- the claims' and the recipients', and count them off the budget's used.
-- Runs after budget_lock.sql, in its transaction.
WITH claims AS (
    DELETE FROM engagement_send_budget_claims
     WHERE transport = @transport
       AND spent_at <= now() + @clock_offset::interval - @window::interval
    RETURNING recipients
), recipients AS (
    DELETE FROM engagement_send_budget_recipients
     WHERE transport = @transport
       AND spent_at <= now() + @clock_offset::interval - @window::interval
    RETURNING 1
)
UPDATE engagement_send_budgets
   SET used = greatest(used - (SELECT coalesce(sum(recipients), 0) FROM claims)
                            - (SELECT count(*) FROM recipients), 0)
 WHERE transport = @transport;
