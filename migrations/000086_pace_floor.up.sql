-- The pace's floor (issue 59): when the last request on each transport was
-- written, on the database's clock. queue-process's floor gate
-- (delivery/floor.go) reads it under a transaction-level advisory lock of
-- the transport, lets the next request be written only once the interval
-- (less the floor's slack) has passed since, and sets it right after the
-- write, before the lock goes: two requests of one transport are then that
-- far apart whatever the processes' scheduling. NULL until the first.
ALTER TABLE engagement_transport_pacing
    ADD COLUMN last_start_at timestamptz;
