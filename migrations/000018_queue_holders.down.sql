DROP FUNCTION IF EXISTS engagement_claim_abandoned(text, timestamptz, timestamptz);
DROP TABLE IF EXISTS engagement_queue_holders;
