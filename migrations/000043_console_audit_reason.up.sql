-- The console's audit row says why (issue 41): an optional reason the
-- operator types with a requeue or a cancel, or sends with an enqueue,
-- NULL when none was given. The console's POST /api/messages writes an
-- audit row too, as the action 'enqueue'.
ALTER TABLE engagement_console_audit
    ADD COLUMN reason text CHECK (char_length(reason) BETWEEN 1 AND 500);
ALTER TABLE engagement_console_audit
    DROP CONSTRAINT engagement_console_audit_action_check,
    ADD CONSTRAINT engagement_console_audit_action_check CHECK (action IN ('requeue', 'cancel', 'enqueue'));
