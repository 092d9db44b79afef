DROP FUNCTION engagement_reminder_due(timestamptz, timestamptz);
DROP FUNCTION engagement_goodbye_due(timestamptz, interval, text, boolean, timestamptz, timestamptz, text, text, timestamptz, timestamptz);
DROP FUNCTION engagement_inactivity_due(timestamptz, interval, timestamptz, timestamptz, timestamptz, timestamptz);
