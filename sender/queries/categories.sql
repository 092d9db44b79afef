-- The message types whose category the operator declared
-- (engagement_message_types, migration 69), by type.
SELECT message_type, category, declared_at, coalesce(declared_by, '') AS declared_by
  FROM engagement_message_types
 ORDER BY message_type
