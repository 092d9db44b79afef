-- When did a user's state last change, and when was a transition logged?
--
-- engagementctl verify's log_matches_state check asks whether a user whose
-- state disagrees with their latest logged transition was moved after that
-- transition was written. updated_at cannot tell: the bot stamps it with
-- now(), the start of its transaction, so a bot transaction that began
-- before the job's and commits after it carries a time earlier than the
-- transition's although its write came later (issue 16). These columns
-- record the physical order of the writes; they are never business time:
--
--   user_engagement_states.state_changed_at       clock_timestamp() of the
--       write that last changed state (set by the trigger below on UPDATE,
--       by the default on INSERT)
--   user_engagement_states.state_changed_xact_at  now() of that write's
--       transaction
--   engagement_state_transitions.logged_at        clock_timestamp() when the
--       log row was written
--
-- Rows written before this migration keep NULL (the check then compares
-- updated_at as before). The columns are added without defaults first and
-- given them afterwards, so existing rows are not rewritten.
ALTER TABLE user_engagement_states ADD COLUMN state_changed_at timestamptz;
ALTER TABLE user_engagement_states ADD COLUMN state_changed_xact_at timestamptz;
ALTER TABLE user_engagement_states ALTER COLUMN state_changed_at SET DEFAULT clock_timestamp();
ALTER TABLE user_engagement_states ALTER COLUMN state_changed_xact_at SET DEFAULT now();

ALTER TABLE engagement_state_transitions ADD COLUMN logged_at timestamptz;
ALTER TABLE engagement_state_transitions ALTER COLUMN logged_at SET DEFAULT clock_timestamp();

-- The stamp cannot be forged or forgotten by a writer: the trigger sets it
-- on every UPDATE that changes state, whatever the statement says. It
-- fires after the row lock is taken, so a write that waited for another
-- transaction's lock is stamped when it really happens.
CREATE FUNCTION engagement_stamp_state_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.state_changed_at := clock_timestamp();
    NEW.state_changed_xact_at := now();
    RETURN NEW;
END
$$;

CREATE TRIGGER engagement_stamp_state_change
    BEFORE UPDATE ON user_engagement_states
    FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION engagement_stamp_state_change();
