-- The values of the bot's user_engagement_states.state that the scheduler does not know
-- (not in @allowed; NULL shown as 'NULL'), at most 10: migrate up refuses
-- a table holding any.
SELECT coalesce(state::text, 'NULL') AS value
  FROM user_engagement_states
 WHERE state IS NULL OR state::text <> ALL(@allowed::text[])
 GROUP BY 1
 ORDER BY 1
 LIMIT 10
