-- How long, on the database's clock, until the next request on @transport
-- may be written: @gap after the last one's (last_start_at, set by
-- floor_record.sql), 0 when that is past or there was none. Read under the
-- floor gate (floor_lock.sql).
SELECT coalesce((SELECT greatest(p.last_start_at + @gap::interval - clock_timestamp(), interval '0')
                   FROM engagement_transport_pacing p
                  WHERE p.transport = @transport), interval '0') AS wait
