-- Every transport's last pause, active or not, newest first; active at the
-- database's clock: not cleared, its end (NULL: none) not reached.
--
-- not null: active
SELECT transport, kind, status_code, paused_at, paused_until, paused_by, refusals, cleared_at, cleared_by,
       (cleared_at IS NULL AND (paused_until IS NULL OR paused_until > now())) AS active
  FROM engagement_transport_pauses
 ORDER BY paused_at DESC, transport;
