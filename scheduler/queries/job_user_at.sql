-- The user whose user_engagement_states row is at position @at (a ctid):
-- names a user whose row failed alone.
SELECT user_id FROM user_engagement_states WHERE ctid = @at::tid
