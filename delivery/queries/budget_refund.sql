-- Give back the slots of messages @ids handed back unsent (a shutdown, an
-- outage, a claim recovered with no send in flight): a recipient the claim
-- of one of them brought into the window leaves it, and one it found there
-- gets its earlier stamp back. A stamp a later claim made is left alone.
-- Runs after budget_lock.sql, in its transaction.
WITH refunded AS (
    DELETE FROM engagement_send_budget_recipients
     WHERE transport = @transport
       AND message_id = ANY(@ids::uuid[])
       AND previous_spent_at IS NULL
    RETURNING 1
), restored AS (
    UPDATE engagement_send_budget_recipients
       SET spent_at = previous_spent_at,
           previous_spent_at = NULL,
           message_id = NULL
     WHERE transport = @transport
       AND message_id = ANY(@ids::uuid[])
       AND previous_spent_at IS NOT NULL
)
UPDATE engagement_send_budgets
   SET used = greatest(used - (SELECT count(*) FROM refunded), 0)
 WHERE transport = @transport;
