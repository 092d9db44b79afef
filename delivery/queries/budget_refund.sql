-- Give back the slots of messages handed back unsent (a shutdown, an
-- outage, a claim recovered with no send in flight): @claims lose @counts
-- of their recipients (the caller counts a recipient when every message of
-- the claim to them came back); a recipient the claim of one of @ids
-- brought into the window leaves it, and one it found there gets its
-- earlier stamp back (a stamp a later claim made is left alone). Slots
-- already out of the window are not counted twice. Runs after
-- budget_lock.sql, in its transaction.
WITH claims AS (
    UPDATE engagement_send_budget_claims c
       SET recipients = greatest(c.recipients - r.n, 0)
      FROM unnest(@claims::bigint[], @counts::int[]) AS r(id, n)
     WHERE c.id = r.id
    RETURNING r.n AS given
), refunded AS (
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
   SET used = greatest(used - (SELECT coalesce(sum(given), 0) FROM claims) - (SELECT count(*) FROM refunded), 0)
 WHERE transport = @transport;
