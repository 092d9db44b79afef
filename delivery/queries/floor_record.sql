-- Records that a request on @transport was just written (or that the gate
-- stopped waiting for it): the next may be written a gap after now
-- (floor_wait.sql). Run under the floor gate, right before it commits.
UPDATE engagement_transport_pacing
   SET last_start_at = clock_timestamp()
 WHERE transport = @transport
