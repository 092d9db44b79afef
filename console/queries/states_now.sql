-- Users by state now, and how many of them opted out of re-engagement.
SELECT s.state, count(*) AS users
  FROM user_engagement_states s
 GROUP BY s.state
 ORDER BY s.state;
