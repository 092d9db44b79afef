-- The wishes (opt-outs and erasures, engagement_wishes, migration 72) of
-- the transactions that were running, or had not started, when the
-- previous read's snapshot was taken (xid at least its xmin, @since): every
-- wish that committed since then is among them, whatever order the
-- transactions committed in, and those it returned already may be again
-- (the caller skips them by id). Also returns this snapshot's xmin, the
-- next read's @since. One index range scan; nothing is returned most of
-- the time.
-- not null: xmin
SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
       ARRAY(SELECT w.id FROM engagement_wishes w
              WHERE w.xid >= @since::bigint::text::xid8 ORDER BY w.id) AS ids,
       ARRAY(SELECT w.user_id::text FROM engagement_wishes w
              WHERE w.xid >= @since::bigint::text::xid8 ORDER BY w.id) AS users;
