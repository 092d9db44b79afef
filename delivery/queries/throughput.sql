-- Record what the Graph API said about @phone_number_id's throughput at
-- the start of a run, and return whether the number is on the WhatsApp
-- Business app as far as is known (migration 77): @on_biz_app is Meta's
-- is_on_biz_app, NULL when the answer did not carry it as a boolean (or
-- there was no answer): then what was known before stays, so that a number
-- once seen there stays a 20 mps number until Meta says otherwise.
--
-- nullable: @on_biz_app
INSERT INTO engagement_number_throughput AS t (phone_number_id, on_biz_app_at, read_at)
VALUES (@phone_number_id, CASE WHEN @on_biz_app::boolean THEN now() END, now())
    ON CONFLICT (phone_number_id) DO UPDATE
   SET on_biz_app_at = CASE WHEN @on_biz_app::boolean IS NULL THEN t.on_biz_app_at
                            WHEN @on_biz_app::boolean THEN coalesce(t.on_biz_app_at, EXCLUDED.on_biz_app_at) END,
       read_at       = EXCLUDED.read_at
RETURNING t.on_biz_app_at IS NOT NULL AS on_biz_app;
