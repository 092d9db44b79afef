-- Which shard a user belongs to, decided by the database alone so that
-- every process agrees whatever language or version it runs: PostgreSQL's
-- 64-bit hash of the id's text, sign bit cleared, modulo the count.
--
-- Every statement of a job keeps the run's users with
-- engagement_in_shard(s.user_id, @shard_index, @shard_count). The function
-- is plain SQL, IMMUTABLE and not STRICT, so the planner inlines it into
-- each statement, where a count of 1 (every user) folds to true and costs
-- nothing: the predicate lives here once instead of in every file.
CREATE FUNCTION engagement_in_shard(user_id uuid, shard_index integer, shard_count integer)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT shard_count = 1
        OR ((hashtextextended(user_id::text, 0) & 9223372036854775807) % shard_count) = shard_index
$$;
