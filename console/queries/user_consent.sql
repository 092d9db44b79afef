-- One user's consent history, newest first (the latest @limit): each change
-- of their opt-out, its source, who (an operator) and when, and each call
-- superseded by a wish the user made later (migration 68: it changed
-- nothing).
SELECT opted_out, source, coalesce(actor, '') AS actor, at, superseded
  FROM engagement_consent_events
 WHERE user_id = @user_id::uuid
 ORDER BY id DESC
 LIMIT @limit;
