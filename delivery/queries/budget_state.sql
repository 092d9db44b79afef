-- @transport's send budget as a run leaves it: the slots spent in the
-- window (on the processor's clock, @clock_offset ahead of the
-- database's), the messages waiting on the budget, and the oldest spend
-- in the window (the next slot frees @window after it).
WITH spent AS (
    SELECT 1 AS slots, spent_at
      FROM engagement_send_budget_recipients
     WHERE transport = @transport AND spent_at > now() + @clock_offset::interval - @window::interval
    UNION ALL
    SELECT recipients, spent_at
      FROM engagement_send_budget_claims
     WHERE transport = @transport AND spent_at > now() + @clock_offset::interval - @window::interval
       AND recipients > 0
)
SELECT coalesce(sum(slots), 0)::int AS used,
       (SELECT count(*)::int FROM engagement_message_queue
         WHERE status = 'pending' AND deferred_reason = 'budget') AS waiting,
       min(spent_at) AS oldest
  FROM spent;
