-- The state rows' foreign key to their profiles holds by construction:
-- where the role may, the load skips its per-row check (no trigger fires
-- under replica). 05_states_checked turns it back.
SET session_replication_role = replica
