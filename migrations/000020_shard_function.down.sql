DROP FUNCTION engagement_in_shard(uuid, integer, integer);
