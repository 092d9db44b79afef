-- queue-process as it is at @as_of: the two processors whose claims the
-- in-flight messages are (alive: verify's no_expired_claims holds), the
-- webhook's pace, and the send ledger's row of each message in flight
-- (its attempt started, no outcome yet). The ledger of settled messages is
-- left empty: nothing reads it for them but the daily job's
-- goodbye_timeout, which falls back to goodbye_sent_at, and five million
-- more rows would double the load.
WITH holders AS (
    INSERT INTO engagement_queue_holders (holder, alive_until, buried, started_at)
    SELECT h, @as_of::timestamptz + interval '50 seconds', false, @as_of::timestamptz - n * interval '90 seconds'
      FROM unnest(@holders::text[]) WITH ORDINALITY AS x (h, n)
), pace AS (
    INSERT INTO engagement_transport_pacing (transport, next_send_at)
    VALUES ('webhook', @as_of::timestamptz + interval '1 second')
)
INSERT INTO engagement_processed_messages (message_id, transport, status, attempts, first_attempt_at, last_attempt_at)
SELECT id, 'webhook', 'processing', retry_count + 1,
       claimed_until - interval '5 minutes', claimed_until - interval '5 minutes'
  FROM engagement_message_queue
 WHERE status = 'processing'
