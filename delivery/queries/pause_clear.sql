-- Clear @transport's active pause early (an operator, @cleared_by: its
-- sends may start again at once). The row stays, as the last pause's
-- record. Returns the cleared pause's kind; no row: none was active.
UPDATE engagement_transport_pauses
   SET cleared_at = now(),
       cleared_by = @cleared_by
 WHERE transport = @transport
   AND cleared_at IS NULL
   AND (paused_until IS NULL OR paused_until > now())
RETURNING kind;
