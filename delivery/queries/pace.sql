-- Reserve the next send slot on @transport and return how long to wait for
-- it: a slot is the later of now and the previous reservation's slot plus
-- @interval, so the starts of two sends on one transport are at least
-- @interval apart, across every process. The row is locked for this
-- statement only, never across a send.
INSERT INTO engagement_transport_pacing AS p (transport, next_send_at)
VALUES (@transport, clock_timestamp() + @interval::interval)
    ON CONFLICT (transport) DO UPDATE
   SET next_send_at = greatest(p.next_send_at, clock_timestamp()) + @interval::interval
RETURNING greatest(next_send_at - @interval::interval - clock_timestamp(), interval '0');
