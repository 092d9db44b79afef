-- The messages accepted (sent_at) in the @window up to @as_of: sent, or
-- failed after acceptance (failed with a sent_at: engagement_receipt keeps
-- it), by the transport that sent them, pricing category and the first
-- three digits of the recipient's number (every calling code is 1 to 3
-- digits; the caller maps them to a country), with how many of them were
-- delivered, failed or are still awaiting a receipt, and how many of the
-- delivered ones (and of those awaiting) Meta bills.
--
-- The transport is the send ledger's (engagement_processed_messages, a row
-- per message and transport): the row that recorded the message's provider
-- id, else the one that says sent, else the latest. A message without a
-- ledger row (sent before the ledger, or by the bot's own code) is Meta's
-- when Meta's webhook priced it (billable or pricing_category), else ''
-- (not known). Only @meta_transport's messages (the Cloud API's) cost
-- anything; the others are counted by transport, with no category or
-- prefix.
--
-- Meta bills per message when it is delivered ("Pricing on the WhatsApp
-- Business Platform", https://developers.facebook.com/docs/whatsapp/pricing;
-- "you are charged each time a billable message is delivered",
-- https://developers.facebook.com/documentation/business-messaging/whatsapp/groups/pricing/):
-- billed is delivered (a delivered or read receipt: delivered_at), not
-- said free by Meta (billable false) and not a utility template free in
-- its customer service window (below). A message that failed after
-- acceptance and was never delivered is never billed, whatever the pricing
-- of its sent status said (billable: true there means billable if
-- delivered). One neither delivered nor failed is awaiting: billed only if
-- it is delivered.
--
-- The category is the latest the message was billed by: Meta's
-- (pricing_category, from its status webhook) when it said, else the one
-- queue-process routed the template by (the ledger row's meta_category,
-- migration 73), else the kind's (@kinds and @categories, statemachine's
-- table; '' for a kind the table does not know). Meta charges "the category
-- applied to the template at time of use" ("Pricing on the WhatsApp
-- Business Platform"). A group (…@g.us) has no prefix: ''.
--
-- A utility template delivered inside an open customer service window (the
-- ledger row's service_window, as queue-process saw it at the request) is
-- free when Meta has not said otherwise (billable NULL) and it was
-- delivered (or, awaiting, would be by @as_of) before @free_utility_until:
-- Meta stopped charging for them on 2025-07-01 and charges for them again
-- from 2026-10-01 ("Upcoming pricing updates for Meta Business Agent,
-- service and utility messages", updated 2026-07-01; see pricing.FreeUtilityInWindowUntil).
-- The sent ones come from the sent_at index; the ledger by its key.
-- not null: prefix
WITH accepted AS (
    SELECT q.id, q.message_type, q.pricing_category, q.billable, q.delivered_at, q.status, q.destination_jid, q.provider_message_id
      FROM engagement_message_queue q
     WHERE q.status = 'sent'
       AND q.sent_at > @as_of::timestamptz - @window::interval AND q.sent_at <= @as_of::timestamptz
    UNION ALL
    SELECT q.id, q.message_type, q.pricing_category, q.billable, q.delivered_at, q.status, q.destination_jid, q.provider_message_id
      FROM engagement_message_queue q
     WHERE q.status = 'failed' AND q.sent_at IS NOT NULL
       AND q.sent_at > @as_of::timestamptz - @window::interval AND q.sent_at <= @as_of::timestamptz
), sent_by AS (
    SELECT a.*,
           coalesce(l.transport,
                    CASE WHEN a.billable IS NOT NULL OR a.pricing_category IS NOT NULL THEN @meta_transport::text ELSE '' END) AS transport,
           coalesce(a.pricing_category, l.meta_category, k.category, '') AS category,
           a.billable IS NULL AND l.service_window AND coalesce(a.delivered_at, @as_of::timestamptz) < @free_utility_until::timestamptz
               AS free_in_window
      FROM accepted a
      LEFT JOIN LATERAL (
            SELECT l.transport, l.meta_category, l.service_window
              FROM engagement_processed_messages l
             WHERE l.message_id = a.id
             ORDER BY l.provider_message_id IS NOT DISTINCT FROM a.provider_message_id DESC,
                      l.status = 'sent' DESC, l.last_attempt_at DESC
             LIMIT 1) l ON true
      LEFT JOIN unnest(@kinds::text[], @categories::text[]) AS k(kind, category) ON k.kind = a.message_type
), billed_by AS (
    SELECT s.*, s.billable IS NOT false AND NOT (s.category = 'utility' AND coalesce(s.free_in_window, false)) AS billed
      FROM sent_by s
)
SELECT s.transport,
       CASE WHEN s.transport = @meta_transport::text THEN s.category ELSE '' END AS category,
       CASE WHEN s.transport = @meta_transport::text
             AND (s.destination_jid LIKE '%@s.whatsapp.net' OR s.destination_jid NOT LIKE '%@%')
            THEN left(split_part(s.destination_jid, '@', 1), 3) ELSE '' END AS prefix,
       count(*) AS accepted,
       count(*) FILTER (WHERE s.delivered_at IS NOT NULL) AS delivered,
       count(*) FILTER (WHERE s.delivered_at IS NOT NULL AND s.billed) AS billed,
       count(*) FILTER (WHERE s.delivered_at IS NULL AND s.status = 'failed') AS failed,
       count(*) FILTER (WHERE s.delivered_at IS NULL AND s.status = 'sent') AS awaiting,
       count(*) FILTER (WHERE s.delivered_at IS NULL AND s.status = 'sent' AND s.billed) AS awaiting_billable
  FROM billed_by s
 GROUP BY 1, 2, 3
 ORDER BY 1, 2, 3;
