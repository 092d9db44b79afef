-- The demo's day 1: now, by the database's clock, to the minute.
-- queue-process delivers and stamps sent_at by that clock, and a
-- goodbye's 48 hours count from it.
SELECT date_trunc('minute', now()) AS day_one
