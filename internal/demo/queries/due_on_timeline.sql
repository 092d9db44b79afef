-- The messages a simulated run queued (one as of an instant ahead of the
-- database clock: the demo's day 3), due when that run ran on the demo's
-- timeline. The jobs queue them due at least(as-of, now()), so that a real
-- queue-process sends them at once; the console, which treats the demo's
-- last day as now, would then measure two days of send latency that the
-- simulation made, not the scheduler.
UPDATE engagement_message_queue q
   SET scheduled_for = r.as_of
  FROM engagement_job_runs r
 WHERE q.job_run_id = r.id
   AND q.status = 'pending'
   AND q.scheduled_for < r.as_of
