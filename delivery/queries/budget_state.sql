-- @transport's send budget as a run leaves it: the recipients in the window
-- (on the processor's clock, @clock_offset ahead of the database's), the
-- messages waiting on the budget, and the oldest stamp in the window (the
-- next slot frees @window after it).
SELECT count(*)::int,
       (SELECT count(*)::int FROM engagement_message_queue
         WHERE status = 'pending' AND deferred_reason = 'budget'),
       min(spent_at)
  FROM engagement_send_budget_recipients
 WHERE transport = @transport
   AND spent_at > now() + @clock_offset::interval - @window::interval;
