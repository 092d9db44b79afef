DROP TABLE IF EXISTS engagement_transport_pacing;
DROP TABLE IF EXISTS engagement_processed_messages;
DROP INDEX IF EXISTS engagement_message_queue_processing_idx;
ALTER TABLE engagement_message_queue
    DROP COLUMN IF EXISTS provider_message_id,
    DROP COLUMN IF EXISTS claimed_by,
    DROP COLUMN IF EXISTS claimed_until;
