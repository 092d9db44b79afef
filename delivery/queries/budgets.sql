-- Every transport's send budget, for engagementctl status and the console:
-- its limit and ramp as its processes last started, the slots spent in its
-- window now, the oldest spend in the window (the next slot frees a window
-- after it), and the messages waiting on the budget (every transport's: a
-- queue row does not say which transport will send it) with the last one's
-- time, when the line as it stands is through.
SELECT b.transport, b.daily_limit, b.ramp_start, b.ramp_factor::float8, b.ramp_started_at,
       s.used, s.oldest, w.waiting, w.clears_at, b.configured_at, now()
  FROM engagement_send_budgets b
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(e.slots), 0)::int AS used, min(e.spent_at) AS oldest
         FROM (SELECT 1 AS slots, spent_at
                 FROM engagement_send_budget_recipients
                WHERE transport = b.transport AND spent_at > now() - @window::interval
               UNION ALL
               SELECT recipients, spent_at
                 FROM engagement_send_budget_claims
                WHERE transport = b.transport AND spent_at > now() - @window::interval AND recipients > 0) e) s
 CROSS JOIN (
       SELECT count(*)::int AS waiting, max(scheduled_for) AS clears_at
         FROM engagement_message_queue
        WHERE status = 'pending' AND deferred_reason = 'budget') w
 ORDER BY b.transport;
