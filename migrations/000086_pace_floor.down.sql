ALTER TABLE engagement_transport_pacing
    DROP COLUMN IF EXISTS last_start_at;
