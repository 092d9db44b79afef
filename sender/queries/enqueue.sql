-- Queues one message or, when its idempotency key (@idempotency_key; ''
-- for none) is taken, returns the existing row: one statement, atomic
-- under concurrent callers. The conflict arm rewrites the key with itself
-- so that RETURNING yields the existing row (DO NOTHING would return
-- nothing); no column changes value. xmax is non-zero exactly when the row
-- was not freshly inserted.
--
-- An omitted destination or JID ('') is routed from the user's profile as
-- the jobs route them (engagement_route, migration 40). With neither, destination_jid is NULL and
-- the insert fails (NOT NULL): the caller reports "no destination".
-- @period_start and @replay_until (NULL for none) say what the key covers
-- and until when it could be produced again (cleanup keeps the message
-- until then). @params is JSON as text (NULL for none): in pgx's exec mode,
-- for transaction poolers, bytes would be sent as bytea.
--
-- nullable: @params, @scheduled_for, @period_start, @replay_until
INSERT INTO engagement_message_queue
       (user_id, message_type, message_key, message_params, destination, destination_jid,
        scheduled_for, idempotency_key, period_start, replay_until)
SELECT @user_id, @type, NULLIF(@key, ''), coalesce(@params::text::jsonb, '{}'),
       coalesce(NULLIF(@destination, ''), route.destination, 'individual'),
       coalesce(NULLIF(btrim(@jid), ''), route.destination_jid),
       coalesce(@scheduled_for, now()), NULLIF(@idempotency_key, ''),
       @period_start::timestamptz, @replay_until::timestamptz
  FROM (SELECT) AS one
  LEFT JOIN user_profiles p ON p.user_id = @user_id
  LEFT JOIN LATERAL engagement_route(p.preferred_destination, p.group_jid, p.whatsapp_jid) route ON true
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL
DO UPDATE SET idempotency_key = EXCLUDED.idempotency_key
RETURNING id::text, (xmax <> 0) AS duplicate,
          message_type, coalesce(message_key, '') AS message_key, message_params, destination, destination_jid
