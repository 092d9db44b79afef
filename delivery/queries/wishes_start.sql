-- The start of a run's reading of the wishes (opt-outs and erasures,
-- engagement_wishes, migration 72): deletes the ones older than a day
-- (a wish matters to the batches in flight when it commits, seconds at
-- most), and returns the xmin of this statement's snapshot, from which the
-- run's first read of the wishes (wishes.sql) starts.
-- not null: xmin
WITH pruned AS (
    DELETE FROM engagement_wishes WHERE created_at < now() - interval '1 day'
    RETURNING 1
)
SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
       (SELECT count(*) FROM pruned) AS pruned;
