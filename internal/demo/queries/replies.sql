-- The goodbye's answers, as the bot reports them (engagement_fire), now:
-- of the users whose goodbye was sent, 4 in 20 answer "I need help", 2
-- "remind me later", 2 "not now", and 4 write to the bot again; of the
-- users the holdout kept from a goodbye, 2 in 20 write again on their own.
-- So the funnel has outcomes, and the holdout's comparison two arms.
SELECT count(engagement_fire(r.user_id, r.trigger, now())) AS fired
  FROM (SELECT s.user_id,
               CASE WHEN s.goodbye_holdout THEN CASE WHEN abs(hashtext(s.user_id::text || ':reply')) % 20 < 2 THEN @comeback::text END
                    ELSE (ARRAY[@help::text, @help::text, @help::text, @help::text, @remind_later::text, @remind_later::text,
                                @not_now::text, @not_now::text, @comeback::text, @comeback::text, @comeback::text, @comeback::text])[1 + abs(hashtext(s.user_id::text || ':reply')) % 20]
               END AS trigger
          FROM user_engagement_states s
         WHERE s.state = @goodbye_state::text
           AND (s.goodbye_holdout
                OR EXISTS (SELECT 1 FROM engagement_message_queue q
                            WHERE q.user_id = s.user_id AND q.message_type = @goodbye_kind::text AND q.status = 'sent'))) r
 WHERE r.trigger IS NOT NULL
