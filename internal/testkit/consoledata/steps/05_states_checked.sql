-- Back to firing triggers, and so to checking foreign keys, after
-- 05_states_unchecked.
RESET session_replication_role
