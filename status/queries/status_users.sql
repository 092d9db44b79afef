-- Users by state, with how many of them opted out. Every state row has
-- its profile (a foreign key); the opted-out profiles, few, are hashed
-- and the states read once, not joined to every profile.
SELECT s.state, count(*) AS users, count(o.user_id) AS opted_out
  FROM user_engagement_states s
  LEFT JOIN (SELECT p.user_id FROM user_profiles p WHERE p.reengagement_opt_out) o ON o.user_id = s.user_id
 GROUP BY s.state
