-- The demo's users who write to the bot at their own hour (issue 61): each
-- active user silent for over 19 days at @day_one has written four times,
-- 40, 33, 26 and 19 days before it, at the same hour of the day in their
-- zone (08:00 to 21:00, from the user id; São Paulo's zone when they have
-- none), as the bot reports every message: engagement_fire(...,
-- @trigger, p_at). Still over 14 days silent, they get their goodbye on
-- day 1, and engagement-daily --best-hour has their hour to send it at.
SELECT count(engagement_fire(s.user_id, @trigger::text, m.at)) AS fired
  FROM user_engagement_states s
  JOIN user_profiles p USING (user_id)
 CROSS JOIN LATERAL (
       SELECT (date_trunc('day', @day_one::timestamptz AT TIME ZONE coalesce(p.timezone, 'America/Sao_Paulo'))
               - n * interval '1 day'
               + (8 + abs(hashtext(s.user_id::text)) % 14) * interval '1 hour'
               + (abs(hashtext(s.user_id::text || ':' || n)) % 50) * interval '1 minute')
              AT TIME ZONE coalesce(p.timezone, 'America/Sao_Paulo') AS at
         FROM generate_series(40, 19, -7) AS n
 ) m
 WHERE s.state = @active::text AND s.last_activity_at < @day_one::timestamptz - interval '19 days'
