-- Check log_matches_state: a user's latest logged transition leads to
-- their current state, unless the state changed after that transition was
-- logged. Users with no logged transition are not checked.
--
-- "After" is read from physical write times (migration 15): the trigger
-- stamps state_changed_at (clock_timestamp()) on every change of state,
-- whoever makes it and whatever they do with updated_at, and logged_at is
-- when the log row was written. The bot answering a goodbye in a later
-- transaction that leaves updated_at alone, or in one that began before
-- the job's and wrote after it, both change the state after the log row:
-- no violation. A log row that disagrees with a state last changed before
-- it (the job logged a move it did not make) is one. Rows from before
-- migration 15 (no stamps) fall back to updated_at against the
-- transition's time. See verify_goodbye_queued.sql for the statement's
-- shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT s.user_id::text || ' (state ' || s.state || ', log says ' || l.to_state || ')', false
      FROM (SELECT DISTINCT ON (user_id) user_id, to_state, created_at, logged_at
              FROM engagement_state_transitions
             ORDER BY user_id DESC, id DESC) l
      JOIN user_engagement_states s ON s.user_id = l.user_id
     WHERE s.state <> l.to_state
       AND CASE WHEN s.state_changed_at IS NOT NULL AND l.logged_at IS NOT NULL
                THEN s.state_changed_at <= l.logged_at
                ELSE s.updated_at <= l.created_at END
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
