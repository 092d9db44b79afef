-- The messages WhatsApp accepted (sent_at) in the @window up to @as_of:
-- sent, or failed after acceptance (failed with a sent_at:
-- engagement_receipt keeps it), by pricing category and the first three
-- digits of the recipient's number (every calling code is 1 to 3 digits;
-- the caller maps them to a country), with how many of them Meta bills.
--
-- The category is Meta's (pricing_category, from its status webhook) when
-- it said, else the kind's (@kinds and @categories, statemachine's table;
-- '' for a kind the table does not know). Billable is Meta's billable
-- when it said; else, since Meta bills per delivered template, whether a
-- receipt says it was delivered, when any receipt came for the message
-- (delivered_at, or a failure after acceptance: not billed); else
-- (no receipt at all) accepted counts as billed. A group (…@g.us) has no
-- prefix: ''. The sent ones come from the sent_at index.
WITH accepted AS (
    SELECT q.message_type, q.pricing_category, q.billable, q.delivered_at, q.status, q.destination_jid
      FROM engagement_message_queue q
     WHERE q.status = 'sent'
       AND q.sent_at > @as_of::timestamptz - @window::interval AND q.sent_at <= @as_of::timestamptz
    UNION ALL
    SELECT q.message_type, q.pricing_category, q.billable, q.delivered_at, q.status, q.destination_jid
      FROM engagement_message_queue q
     WHERE q.status = 'failed' AND q.sent_at IS NOT NULL
       AND q.sent_at > @as_of::timestamptz - @window::interval AND q.sent_at <= @as_of::timestamptz
)
SELECT coalesce(a.pricing_category, k.category, '') AS category,
       CASE WHEN a.destination_jid LIKE '%@s.whatsapp.net' OR a.destination_jid NOT LIKE '%@%'
            THEN left(split_part(a.destination_jid, '@', 1), 3) ELSE '' END AS prefix,
       count(*) AS accepted,
       count(*) FILTER (WHERE coalesce(a.billable,
                                       CASE WHEN a.delivered_at IS NOT NULL THEN true
                                            WHEN a.status = 'failed' THEN false
                                            ELSE true END)) AS billable
  FROM accepted a
  LEFT JOIN unnest(@kinds::text[], @categories::text[]) AS k(kind, category) ON k.kind = a.message_type
 GROUP BY 1, 2
 ORDER BY 1, 2;
