-- End @holder's lease when it holds no claim any more (a clean exit); a
-- holder that still has messages in flight keeps its row, which recovery
-- buries once it has not been renewed in time.
DELETE FROM engagement_queue_holders h
 WHERE h.holder = @holder
   AND NOT EXISTS (SELECT FROM engagement_message_queue q
                    WHERE q.status = 'processing' AND q.claimed_by = @holder);
