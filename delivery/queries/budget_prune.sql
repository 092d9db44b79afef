-- Drop the recipients out of @transport's window (their last claim @window
-- or more before now, on the processor's clock: @clock_offset ahead of the
-- database's) and count them off the budget's used. Runs after
-- budget_lock.sql, in its transaction.
WITH expired AS (
    DELETE FROM engagement_send_budget_recipients
     WHERE transport = @transport
       AND spent_at <= now() + @clock_offset::interval - @window::interval
    RETURNING 1
)
UPDATE engagement_send_budgets
   SET used = greatest(used - (SELECT count(*) FROM expired), 0)
 WHERE transport = @transport;
