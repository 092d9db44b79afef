-- WhatsApp's receipts for the messages accepted (sent_at) in the @window up
-- to @as_of: how many were accepted, delivered and read by their receipts,
-- and failed after acceptance (failed with a sent_at: engagement_receipt
-- keeps it), by WhatsApp's error code. One row per code, the totals on
-- every row; no row when nothing was accepted. The sent ones come from the
-- sent_at index; the failed from the failed alone. code is NULL on the row
-- of a window without a failure.
WITH accepted AS (
    SELECT q.delivered_at, q.read_at, NULL::text AS code
      FROM engagement_message_queue q
     WHERE q.status = 'sent'
       AND q.sent_at > @as_of::timestamptz - @window::interval AND q.sent_at <= @as_of::timestamptz
    UNION ALL
    SELECT NULL, NULL, coalesce(substring(q.error_message FROM 'WhatsApp error ([0-9]+)'), '')
      FROM engagement_message_queue q
     WHERE q.status = 'failed' AND q.sent_at IS NOT NULL
       AND q.sent_at > @as_of::timestamptz - @window::interval AND q.sent_at <= @as_of::timestamptz
), totals AS (
    SELECT count(*) AS accepted,
           count(*) FILTER (WHERE delivered_at IS NOT NULL) AS delivered,
           count(*) FILTER (WHERE read_at IS NOT NULL) AS read,
           count(*) FILTER (WHERE code IS NOT NULL) AS failed_late
      FROM accepted
)
SELECT t.accepted, t.delivered, t.read, t.failed_late, c.code, coalesce(c.n, 0) AS code_messages
  FROM totals t
  LEFT JOIN (SELECT code, count(*) AS n FROM accepted WHERE code IS NOT NULL GROUP BY code) c ON true
 WHERE t.accepted > 0
 ORDER BY c.n DESC NULLS LAST, c.code;
