-- Marks erase's wish for user @user_id (engagement_wishes, migration 72):
-- a queue-process sending a batch that holds one of the user's claimed
-- messages reads it within 150 ms of the erase's commit and checks that
-- message again before its send (its user is opted out, or has no profile:
-- cancelled). The opt-out erase records marks it too; this one covers a
-- user who had opted out already, or has no profile.
INSERT INTO engagement_wishes (user_id) VALUES (@user_id::uuid);
