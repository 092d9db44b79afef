-- Records that user @user_id was erased (migration 69), or again, when:
-- every door reads engagement_erasures, so nothing more is queued for them,
-- claimed or sent, whatever its type, until they opt back in
-- (engagement_refusal).
INSERT INTO engagement_erasures (user_id) VALUES (@user_id::uuid)
ON CONFLICT (user_id) DO UPDATE SET erased_at = now()
