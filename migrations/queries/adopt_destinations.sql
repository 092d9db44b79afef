-- The values of the bot's engagement_message_queue.destination that the
-- scheduler does not know (not in @allowed; NULL shown as 'NULL'), at most
-- 10: migrate up refuses a table holding any. A value that looks like a
-- WhatsApp JID is shown as '<a JID>': JIDs never reach a log.
SELECT CASE WHEN destination LIKE '%@%' THEN '<a JID>' ELSE coalesce(destination::text, 'NULL') END AS value
  FROM engagement_message_queue
 WHERE destination IS NULL OR destination::text <> ALL(@allowed::text[])
 GROUP BY 1
 ORDER BY 1
 LIMIT 10
