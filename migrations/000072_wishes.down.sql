-- Wishes reach claimed messages at the next check of their batch again,
-- up to delivery.RecheckAge after they commit.
DROP TRIGGER IF EXISTS engagement_note_wish ON engagement_consent_events;
DROP FUNCTION IF EXISTS engagement_note_wish();
DROP TABLE IF EXISTS engagement_wishes;
