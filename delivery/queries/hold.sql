-- Start or renew @holder's lease (engagement_queue_holders): alive for
-- @claim_timeout from now. A holder that recovery has buried stays buried:
-- no row comes back, and the holder knows that every claim it had is gone
-- (recovery settled them, or will). Renewing one row, not every claimed
-- message, keeps renewals off the rows that claims and outcomes lock.
INSERT INTO engagement_queue_holders AS h (holder, alive_until)
VALUES (@holder, clock_timestamp() + @claim_timeout::interval)
    ON CONFLICT (holder) DO UPDATE
   SET alive_until = EXCLUDED.alive_until
 WHERE NOT h.buried
RETURNING h.holder;
