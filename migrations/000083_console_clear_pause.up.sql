-- The console's queue page clears a transport's account pause (issue 58):
-- an audited action, as engagementctl pause clear.
ALTER TABLE engagement_console_audit
    DROP CONSTRAINT engagement_console_audit_action_check,
    ADD CONSTRAINT engagement_console_audit_action_check
        CHECK (action IN ('requeue', 'cancel', 'enqueue', 'opt_out', 'opt_in', 'erase', 'clear_pause'));
