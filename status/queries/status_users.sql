-- Users by state, with how many of them opted out.
SELECT s.state, count(*) AS users, count(*) FILTER (WHERE p.reengagement_opt_out) AS opted_out
  FROM user_engagement_states s
  JOIN user_profiles p ON p.user_id = s.user_id
 GROUP BY s.state
