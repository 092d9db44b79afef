-- Move the budget's line up when the window has room and nothing is due:
-- the first messages waiting on @transport's budget, as many as it has
-- free slots (@daily_limit less used: a ramp that grew, slots given back),
-- become due now, in the order they waited (a microsecond apart). Runs
-- after budget_lock.sql and budget_prune.sql, in their transaction.
WITH free AS (
    SELECT greatest(@daily_limit::int - used, 0) AS slots
      FROM engagement_send_budgets
     WHERE transport = @transport
), next AS (
    SELECT w.id, row_number() OVER (ORDER BY w.scheduled_for, w.id) AS place
      FROM (SELECT id, scheduled_for
              FROM engagement_message_queue
             WHERE status = 'pending' AND deferred_reason = 'budget'
               AND scheduled_for > now() + @clock_offset::interval
             ORDER BY scheduled_for
             LIMIT (SELECT slots FROM free)
               FOR UPDATE SKIP LOCKED) w
)
UPDATE engagement_message_queue q
   SET scheduled_for = now() + @clock_offset::interval + (n.place - 1) * interval '1 microsecond'
  FROM next n
 WHERE q.id = n.id;
