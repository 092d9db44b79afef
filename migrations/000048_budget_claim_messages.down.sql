ALTER TABLE engagement_send_budget_claims
    DROP COLUMN IF EXISTS message_recipients,
    DROP COLUMN IF EXISTS message_ids;
