-- Record that the receiver refused @transport's whole account (@kind, HTTP
-- @status_code), at the processor's clock (@clock_offset ahead of the
-- database's), for @wait (0: until an operator clears it), as @holder saw
-- it. An active pause is never shortened: a refusal that ends no later
-- than it changes nothing; one that ends later (or never) takes it over,
-- keeping when it began and counting the refusal. A cleared or ended
-- pause is replaced by a new one.
INSERT INTO engagement_transport_pauses AS p (transport, kind, status_code, paused_at, paused_until, paused_by)
VALUES (@transport, @kind, @status_code::integer, now() + @clock_offset::interval,
        CASE WHEN @wait::interval > interval '0' THEN now() + @clock_offset::interval + @wait::interval END, @holder)
    ON CONFLICT (transport) DO UPDATE
   SET kind         = EXCLUDED.kind,
       status_code  = EXCLUDED.status_code,
       paused_at    = CASE WHEN p.cleared_at IS NULL AND coalesce(p.paused_until > EXCLUDED.paused_at, true)
                           THEN p.paused_at ELSE EXCLUDED.paused_at END,
       paused_until = EXCLUDED.paused_until,
       paused_by    = EXCLUDED.paused_by,
       refusals     = CASE WHEN p.cleared_at IS NULL AND coalesce(p.paused_until > EXCLUDED.paused_at, true)
                           THEN p.refusals + 1 ELSE 1 END,
       cleared_at   = NULL,
       cleared_by   = NULL
 WHERE p.cleared_at IS NOT NULL
    OR p.paused_until <= EXCLUDED.paused_at
    OR (p.paused_until IS NOT NULL AND (EXCLUDED.paused_until IS NULL OR EXCLUDED.paused_until > p.paused_until));
