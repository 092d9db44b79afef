-- How many pages user_engagement_states has: a step walks them in chunks,
-- from the first to this one.
-- not null: pages
SELECT pg_relation_size('user_engagement_states') / current_setting('block_size')::bigint AS pages
