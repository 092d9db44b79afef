-- The values of the bot's engagement_message_queue.status that the scheduler does not know
-- (not in @allowed; NULL shown as 'NULL'), at most 10: migrate up refuses
-- a table holding any.
SELECT coalesce(status::text, 'NULL') AS value
  FROM engagement_message_queue
 WHERE status IS NULL OR status::text <> ALL(@allowed::text[])
 GROUP BY 1
 ORDER BY 1
 LIMIT 10
