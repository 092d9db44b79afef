-- Declares message type @message_type's Meta category (@category) as the
-- operator says it (engagementctl categories set), or again; @declared_by
-- is the operator ('' for nobody named). Every door reads it
-- (engagement_refusal, migration 69).
INSERT INTO engagement_message_types (message_type, category, declared_by)
VALUES (@message_type::text, @category::text, NULLIF(@declared_by::text, ''))
ON CONFLICT (message_type) DO UPDATE
   SET category = EXCLUDED.category, declared_at = now(), declared_by = EXCLUDED.declared_by
