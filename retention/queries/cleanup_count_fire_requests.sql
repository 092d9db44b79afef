-- Dry run of cleanup_delete_fire_requests.sql: how many of the bot's
-- request keys (engagement_fire) are older than @cutoff.
SELECT count(*) AS fire_requests FROM engagement_fire_requests WHERE created_at < @cutoff
