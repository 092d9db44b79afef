-- One user's state, timers and profile (no JID: the page shows its last
-- four digits only, masked here so that the whole never leaves the database).
-- remind_at is remind_later's timer only: the bot leaves the column set when
-- the user moves on, and a stale one would read as a reminder to come.
--
-- nullable: last_activity_at, remind_at
SELECT s.state, s.last_activity_at, s.goodbye_sent_at, s.goodbye_expires_at,
       CASE WHEN s.state = 'remind_later' THEN s.remind_at END AS remind_at, s.created_at,
       coalesce(p.reengagement_opt_out, false) AS opted_out,
       coalesce(p.preferred_destination, '') AS destination,
       coalesce(right(regexp_replace(split_part(p.whatsapp_jid, '@', 1), '[^0-9]', '', 'g'), 4), '') AS jid_last4,
       p.user_id IS NOT NULL AS has_profile
  FROM user_engagement_states s
  LEFT JOIN user_profiles p ON p.user_id = s.user_id
 WHERE s.user_id = @user_id::uuid;
