-- Check log_matches_state: a user's latest logged transition leads to
-- their current state, unless the state changed after that transition: the
-- state row was updated after the transition's time, or its state was
-- changed after the log row was written by a transaction that began before
-- the transition's and stamped updated_at no earlier than its own start
-- (the bot moved them in a transaction that overlapped the job's). Users
-- with no logged transition are not checked.
--
-- updated_at alone cannot order a bot's write against the job's: the bot
-- stamps its transaction's now(), which is earlier than the transition's
-- when its transaction began first, though it wrote later.
-- state_changed_at / logged_at (migration 15, physical write times) order
-- the writes; NULL (rows from before it) falls back to the updated_at
-- comparison alone. See verify_goodbye_queued.sql for the statement's shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT s.user_id::text || ' (state ' || s.state || ', log says ' || l.to_state || ')', false
      FROM (SELECT DISTINCT ON (user_id) user_id, to_state, created_at, coalesce(logged_at, created_at) AS logged_at
              FROM engagement_state_transitions
             ORDER BY user_id DESC, id DESC) l
      JOIN user_engagement_states s ON s.user_id = l.user_id
     WHERE s.state <> l.to_state
       AND s.updated_at <= l.created_at
       AND NOT coalesce(s.state_changed_at > l.logged_at
                        AND s.state_changed_xact_at < l.created_at
                        AND s.updated_at >= s.state_changed_xact_at, false)
)
SELECT count(*) FILTER (WHERE NOT exempt),
       count(*) FILTER (WHERE exempt),
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}')
  FROM found
