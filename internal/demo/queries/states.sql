-- The users by state, in the state machine's order, with how many of them
-- opted out.
SELECT state, count(*) AS users, count(*) FILTER (WHERE p.reengagement_opt_out) AS opted_out
  FROM user_engagement_states s JOIN user_profiles p USING (user_id)
 GROUP BY state
 ORDER BY array_position(@states::text[], state)
