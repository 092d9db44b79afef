-- Reserve the next send slot on @transport and return how long to wait for
-- it: a slot is the later of now and the previous reservation's slot plus
-- the gap after it, @interval and a random part of @jitter (0: none;
-- queue-process --send-jitter), so the starts of two sends on one transport
-- are at least @interval apart, across every process, and their gaps vary
-- up to @interval + @jitter. The gap is drawn once per statement (gap). The
-- row is locked for this statement only, never across a send. Returns the
-- wait and the slot.
-- not null: slot
WITH gap AS (
    SELECT @interval::interval + random() * @jitter::interval AS d
)
INSERT INTO engagement_transport_pacing AS p (transport, next_send_at)
VALUES (@transport, clock_timestamp() + (SELECT d FROM gap))
    ON CONFLICT (transport) DO UPDATE
   SET next_send_at = greatest(p.next_send_at, clock_timestamp()) + (SELECT d FROM gap)
RETURNING greatest(next_send_at - (SELECT d FROM gap) - clock_timestamp(), interval '0') AS delay,
          next_send_at - (SELECT d FROM gap) AS slot;
