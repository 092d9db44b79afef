-- Users by state at the end of each of the last @weeks ISO weeks (UTC; the
-- current week ends at @as_of), worked back from the states now
-- (@now_states, @now_users: status.ReadUsers' counts): a state's
-- count at an instant is its count now, less the logged moves into it
-- after that instant, plus the moves out of it, less the users whose state
-- row was created after it (they start in @initial_state). One pass over
-- the log's moves since the first week's end, bucketed by week: bucket b
-- holds the moves in [start of week b, end of week b) (weeks are half-open:
-- a move at exactly Monday 00:00:00 is the new week's, so a past week's
-- count is the state just before its end), and @weeks those after @as_of.
-- not null: week_start, state
WITH bounds AS (
    SELECT date_trunc('week', @as_of::timestamptz, 'UTC') - (@weeks::int - 1) * interval '7 days' AS first_start
), weeks AS (
    SELECT i, b.first_start + i * interval '7 days' AS week_start,
           least(b.first_start + (i + 1) * interval '7 days', @as_of::timestamptz) AS week_end
      FROM bounds b, generate_series(0, @weeks::int - 1) AS i
), moves AS MATERIALIZED (
    SELECT CASE WHEN t.created_at > @as_of::timestamptz THEN @weeks::int
                ELSE floor(extract(epoch FROM t.created_at - b.first_start) / 604800)::int END AS b,
           t.from_state, t.to_state, count(*) AS n
      FROM engagement_state_transitions t, bounds b
     WHERE t.created_at >= b.first_start + interval '7 days'
       AND t.from_state <> t.to_state
     GROUP BY 1, 2, 3
), arrivals AS MATERIALIZED (
    SELECT CASE WHEN s.created_at > @as_of::timestamptz THEN @weeks::int
                ELSE floor(extract(epoch FROM s.created_at - b.first_start) / 604800)::int END AS b,
           count(*) AS n
      FROM user_engagement_states s, bounds b
     WHERE s.created_at >= b.first_start + interval '7 days'
     GROUP BY 1
), now_counts AS (
    -- the states now, as status.ReadUsers counted them in this transaction
    SELECT unnest(@now_states::text[]) AS state, unnest(@now_users::bigint[]) AS n
)
SELECT w.week_start, w.week_end, st.state,
       (coalesce((SELECT n FROM now_counts c WHERE c.state = st.state), 0)
        - coalesce((SELECT sum(n) FROM moves m WHERE m.b > w.i AND m.to_state = st.state), 0)
        + coalesce((SELECT sum(n) FROM moves m WHERE m.b > w.i AND m.from_state = st.state), 0)
        - CASE WHEN st.state = @initial_state::text
               THEN coalesce((SELECT sum(n) FROM arrivals a WHERE a.b > w.i), 0) ELSE 0 END)::bigint AS users
  FROM weeks w CROSS JOIN unnest(@states::text[]) AS st(state)
 ORDER BY w.i, st.state;
