-- WhatsApp's receipts for what the demo sent by now, as the bot passes
-- them on (engagement_receipt): 9 in 10 sent messages delivered, 6 in 10
-- of them read too, from the message's id. Receipts cannot come from
-- the future: the messages the demo's later simulated days send get none.
SELECT count(engagement_receipt(q.provider_message_id, r.status, now())) AS receipts
  FROM engagement_message_queue q
 CROSS JOIN LATERAL unnest(CASE WHEN abs(hashtext(q.id::text)) % 10 < 6 THEN ARRAY[@delivered::text, @read::text]
                                WHEN abs(hashtext(q.id::text)) % 10 < 9 THEN ARRAY[@delivered::text]
                                ELSE ARRAY[]::text[] END) AS r(status)
 WHERE q.status = 'sent' AND q.provider_message_id IS NOT NULL AND q.delivered_at IS NULL AND q.sent_at <= now()
