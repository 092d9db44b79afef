-- The console's user page opts a user out or back in, and erases what the
-- scheduler keeps of them (issue 44): each an audited action.
ALTER TABLE engagement_console_audit
    DROP CONSTRAINT engagement_console_audit_action_check,
    ADD CONSTRAINT engagement_console_audit_action_check
        CHECK (action IN ('requeue', 'cancel', 'enqueue', 'opt_out', 'opt_in', 'erase'));
