-- Whether user @user_id has a profile (user_profiles: the opt-out needs
-- it), whether any of the scheduler's tables names them (a user with
-- neither is unknown, and erase changes nothing), and how many of their
-- messages are pending (what the opt-out that follows will cancel). No
-- lock: the jobs' role may only read profiles; the opt-out (SECURITY
-- DEFINER) locks the profile, so a consent change or another erase of the
-- user waits for this erase from there on.
-- not null: profile, traces
SELECT EXISTS (SELECT FROM user_profiles p WHERE p.user_id = @user_id::uuid) AS profile,
       EXISTS (SELECT FROM engagement_message_queue q WHERE q.user_id = @user_id::uuid)
    OR EXISTS (SELECT FROM user_engagement_states s WHERE s.user_id = @user_id::uuid)
    OR EXISTS (SELECT FROM engagement_consent_events c WHERE c.user_id = @user_id::uuid)
    OR EXISTS (SELECT FROM engagement_fire_requests r WHERE r.user_id = @user_id::uuid)
    OR EXISTS (SELECT FROM engagement_state_transitions t WHERE t.user_id = @user_id::uuid) AS traces,
       (SELECT count(*) FROM engagement_message_queue q WHERE q.user_id = @user_id::uuid AND q.status = 'pending') AS pending
