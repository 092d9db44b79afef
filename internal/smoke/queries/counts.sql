-- engagementctl smoke's tally of a run's outcome: the transitions logged,
-- the messages queued, and the users by state as "state=n …".
SELECT (SELECT count(*) FROM engagement_state_transitions) AS transitions,
       (SELECT count(*) FROM engagement_message_queue) AS messages,
       (SELECT coalesce(string_agg(state || '=' || n, ' ' ORDER BY state), '')
          FROM (SELECT state, count(*) AS n FROM user_engagement_states GROUP BY state) s) AS states
