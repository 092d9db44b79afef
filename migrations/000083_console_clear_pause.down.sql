-- The audit keeps its rows: the clear_pause rows stay, so the narrower
-- check comes back NOT VALID (it holds for every row written from now on).
ALTER TABLE engagement_console_audit
    DROP CONSTRAINT engagement_console_audit_action_check,
    ADD CONSTRAINT engagement_console_audit_action_check
        CHECK (action IN ('requeue', 'cancel', 'enqueue', 'opt_out', 'opt_in', 'erase')) NOT VALID;
