-- @transport's active pause at the processor's clock (@clock_offset ahead
-- of the database's): not cleared, and its end (NULL: none) not reached.
-- No row: the transport may send.
SELECT kind, status_code, paused_at, paused_until
  FROM engagement_transport_pauses
 WHERE transport = @transport
   AND cleared_at IS NULL
   AND (paused_until IS NULL OR paused_until > now() + @clock_offset::interval);
