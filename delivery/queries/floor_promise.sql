-- Promises, under the floor gate, that the request about to be written on
-- @transport starts before @hold from now (floor.go, promise): the
-- transport's last_start_at becomes that instant, committed at once, in a
-- transaction of its own, not the gate's. So a holder that dies after its
-- write and before its record commits (floor_record.sql) leaves the next
-- request a gap after the latest instant its own may have been written at;
-- its record, when it commits, brings last_start_at back to the write's.
-- Only while the gate is held by @holder, the server process of the
-- gate's transaction: a holder stopped (SIGSTOP) until the server ended
-- that transaction gets no row updated, and must not write.
UPDATE engagement_transport_pacing
   SET last_start_at = greatest(last_start_at, clock_timestamp() + @hold::interval)
 WHERE transport = @transport
   AND EXISTS (SELECT FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.pid = @holder::int
                  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND l.objsubid = 1
                  AND (l.classid::bigint << 32 | l.objid::bigint)
                      = hashtextextended('engagement_transport_floor:' || @transport, 0))
