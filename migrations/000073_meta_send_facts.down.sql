DROP FUNCTION IF EXISTS engagement_service_window_open(timestamptz, timestamptz);
ALTER TABLE engagement_processed_messages
    DROP COLUMN IF EXISTS service_window,
    DROP COLUMN IF EXISTS meta_category;
