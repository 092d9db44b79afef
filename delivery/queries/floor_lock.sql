-- Takes the floor gate of @transport (floor.go): a transaction-level
-- advisory lock, held until the transaction ends (or its connection drops),
-- by one process's worker at a time. Its own statement: the next one's
-- snapshot, taken once the lock is held, sees the last holder's write.
SELECT pg_advisory_xact_lock(hashtextextended('engagement_transport_floor:' || @transport, 0))
