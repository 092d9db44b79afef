-- One action's audit row, in the action's own transaction; @reason is the
-- operator's, '' for none. @filter is JSON text, cast here: as []byte, the
-- binary's exec-mode pool would send it as bytea, which jsonb rejects.
INSERT INTO engagement_console_audit (actor, action, filter, messages, reason)
VALUES (@actor::text, @action::text, @filter::text::jsonb, @messages::bigint, NULLIF(@reason::text, ''))
RETURNING id;
