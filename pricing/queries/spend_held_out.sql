-- The goodbyes the holdout avoided in the @window up to @as_of (issue 45):
-- the users engagement-daily --holdout-percent held out of a goodbye
-- (their @trigger log row says holdout, migration 55), by when it was
-- logged, from the partial index of migration 56. Nothing was queued for
-- them, so nothing was billed: each is a goodbye not paid for.
SELECT count(*) AS held_out
  FROM engagement_state_transitions t
 WHERE t.holdout AND t.trigger = @trigger::text
   AND t.created_at > @as_of::timestamptz - @window::interval AND t.created_at <= @as_of::timestamptz
