-- Send-time respect: why a queued message was cancelled instead of sent,
-- and the user's own time zone for quiet hours.

-- 'opted_out', 'stale', 'no_user' (set when a message is claimed and no
-- longer wanted) or 'operator' (engagementctl cancel). NULL otherwise.
ALTER TABLE engagement_message_queue
    ADD COLUMN cancel_reason text
        CHECK (cancel_reason IN ('opted_out', 'stale', 'no_user', 'operator'));

-- An IANA zone such as 'America/Sao_Paulo'; NULL or empty: the operator's
-- --timezone. An unknown name falls back to it too.
ALTER TABLE user_profiles
    ADD COLUMN timezone text;
