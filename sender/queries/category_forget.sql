-- Forgets the operator's category for @message_type (engagementctl
-- categories unset): the type is marketing again. Returns whether there was
-- one.
-- not null: forgotten
WITH gone AS (
    DELETE FROM engagement_message_types WHERE message_type = @message_type::text RETURNING 1
)
SELECT EXISTS (SELECT FROM gone) AS forgotten
