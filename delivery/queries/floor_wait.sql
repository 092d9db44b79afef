-- How long, on the database's clock, until the next request on @transport
-- may be written: @gap after the last one's (last_start_at, set by
-- floor_record.sql), 0 when that is past or there was none. Read under the
-- floor gate (floor_lock.sql), with the gate's holder: the server process
-- of the gate's transaction (floor_promise.sql checks the gate is still
-- its). Read here, not from the connection's startup: a pooler
-- (PgBouncer) names the client a process of its own, and in transaction
-- mode only a transaction stays on one server process.
-- not null: holder
SELECT coalesce((SELECT greatest(p.last_start_at + @gap::interval - clock_timestamp(), interval '0')
                   FROM engagement_transport_pacing p
                  WHERE p.transport = @transport), interval '0') AS wait,
       pg_backend_pid() AS holder
