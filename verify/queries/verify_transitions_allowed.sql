-- Check transitions_allowed: every logged transition (from_state, trigger,
-- to_state) is a row of the state machine's table, given as the arrays
-- @allowed_from, @allowed_trigger, @allowed_to (statemachine.Transitions).
-- See verify_goodbye_queued.sql for the statement's shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT 'transition ' || l.id || ' of ' || l.user_id || ': ' || l.from_state || ' -' || l.trigger || '-> ' || l.to_state, false
      FROM engagement_state_transitions l
     WHERE NOT EXISTS (
           SELECT 1 FROM unnest(@allowed_from::text[], @allowed_trigger::text[], @allowed_to::text[]) AS a (f, t, d)
            WHERE a.f = l.from_state AND a.t = l.trigger AND a.d = l.to_state)
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
