-- Every transport's send budget, for engagementctl status and the console:
-- its limit and ramp as its processes last started, the recipients in its
-- window now, the oldest stamp in the window (the next slot frees a window
-- after it), and the messages waiting on the budget (every transport's: a
-- queue row does not say which transport will send it) with the last one's
-- time, when the line as it stands is through.
SELECT b.transport, b.daily_limit, b.ramp_start, b.ramp_factor::float8, b.ramp_started_at,
       r.used, r.oldest, w.waiting, w.clears_at, b.configured_at, now()
  FROM engagement_send_budgets b
 CROSS JOIN LATERAL (
       SELECT count(*)::int AS used, min(spent_at) AS oldest
         FROM engagement_send_budget_recipients
        WHERE transport = b.transport AND spent_at > now() - @window::interval) r
 CROSS JOIN (
       SELECT count(*)::int AS waiting, max(scheduled_for) AS clears_at
         FROM engagement_message_queue
        WHERE status = 'pending' AND deferred_reason = 'budget') w
 ORDER BY b.transport;
