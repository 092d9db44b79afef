-- The goodbye's arms by weekly cohort (issue 45): every goodbye (an
-- @goodbye_trigger move) logged in the last @weeks ISO weeks (UTC) up to
-- @as_of, by the week it was logged in (the weeks of console's
-- funnel.sql; half-open, [Monday 00:00, next Monday 00:00): a goodbye at
-- exactly Monday 00:00:00 is that Monday's week's, issue 56), split by what its log row recorded: holdout (migration 55;
-- the daily job held the user out: no message) or treatment (a goodbye was
-- queued; every goodbye before the holdout existed is one). A user counts
-- once per cohort, by their first goodbye of the week: a goodbye that
-- failed and was sent again the next day does not count a treated user
-- twice, while a held-out user never has a second.
--
--   users        the cohort's users in the arm;
--   reactivated  of them, those who wrote again (@comeback_trigger, from
--                any state) after that goodbye (logged after it, and no
--                earlier in time) and within @window of it, by @as_of.
--
-- One row per cohort week with goodbyes, arm and copy variant (the
-- variant's name the daily job recorded on the log row, migration 57; ''
-- for the kind's one text, and always for the held-out arm). Set-based: the goodbyes
-- and the returns of the weeks come from the log's (trigger, created_at)
-- index (migration 36) and meet by user in a join; nothing is looked up
-- goodbye by goodbye.
-- not null: week_start, holdout, variant
WITH bounds AS (
    SELECT date_trunc('week', @as_of::timestamptz, 'UTC') - (@weeks::int - 1) * interval '7 days' AS first_start
), goodbyes AS MATERIALIZED (
    SELECT DISTINCT ON (w.w, g.user_id) g.id, g.user_id, g.created_at, g.holdout, coalesce(g.variant, '') AS variant, w.w
      FROM engagement_state_transitions g
     CROSS JOIN bounds b
     CROSS JOIN LATERAL (
           SELECT floor(extract(epoch FROM g.created_at - b.first_start) / 604800)::int AS w
     ) w
     WHERE g.trigger = @goodbye_trigger::text
       AND g.created_at >= b.first_start AND g.created_at <= @as_of::timestamptz
     ORDER BY w.w, g.user_id, g.id
), returns AS MATERIALIZED (
    SELECT c.id, c.user_id, c.created_at
      FROM engagement_state_transitions c, bounds b
     WHERE c.trigger = @comeback_trigger::text
       AND c.created_at >= b.first_start AND c.created_at <= @as_of::timestamptz
), reactivated AS (
    SELECT DISTINCT g.id
      FROM goodbyes g
      JOIN returns c ON c.user_id = g.user_id AND c.id > g.id
                     AND c.created_at >= g.created_at AND c.created_at <= g.created_at + @window::interval
)
SELECT b.first_start + g.w * interval '7 days' AS week_start,
       g.holdout,
       g.variant,
       count(*)::bigint AS users,
       count(r.id)::bigint AS reactivated
  FROM goodbyes g
 CROSS JOIN bounds b
  LEFT JOIN reactivated r ON r.id = g.id
 GROUP BY g.w, b.first_start, g.holdout, g.variant
 ORDER BY g.w, g.holdout, g.variant
