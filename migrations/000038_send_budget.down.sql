DROP FUNCTION IF EXISTS engagement_send_budget_full();
DROP FUNCTION IF EXISTS engagement_quiet_until(timestamptz, text, interval, interval);
ALTER TABLE engagement_message_queue
    DROP CONSTRAINT IF EXISTS engagement_message_queue_deferred_reason_check,
    DROP COLUMN IF EXISTS deferred_reason;
DROP TABLE IF EXISTS engagement_send_budget_recipients;
DROP TABLE IF EXISTS engagement_send_budget_claims;
DROP TABLE IF EXISTS engagement_send_budgets;
