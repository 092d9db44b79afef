-- Queues one message or, when its idempotency key (@idempotency_key; ''
-- for none) is taken, returns the existing row: one statement, atomic
-- under concurrent callers. The conflict arm rewrites the key with itself
-- so that RETURNING yields the existing row (DO NOTHING would return
-- nothing); no column changes value. xmax is non-zero exactly when the row
-- was not freshly inserted.
--
-- A new message is first held to the rule of every door
-- (engagement_refusal, migration 69), as the claim and the check before
-- each request hold it: @category is the kind's (statemachine), '' for a
-- type that is no kind (then the operator's declared one,
-- engagement_message_types, else marketing); @holdout whether the type is
-- the goodbye the holdout withholds. A refused message is not written: the
-- statement returns one row with refusal set ('erased', 'opted_out',
-- 'holdout') and nothing else. A key already taken returns its message, as
-- a replay must, refused or not.
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
-- not null: id, duplicate, message_type, message_key, destination, destination_jid, refusal
WITH target AS MATERIALIZED (
    SELECT route.destination, route.destination_jid,
           engagement_refusal(coalesce(NULLIF(@category::text, ''),
                                       (SELECT t.category FROM engagement_message_types t WHERE t.message_type = @type::text)),
                              EXISTS (SELECT FROM engagement_erasures e WHERE e.user_id = @user_id::uuid)
                                  AND coalesce(p.reengagement_opt_out, true),
                              coalesce(p.reengagement_opt_out, false),
                              coalesce(@holdout::boolean AND s.goodbye_holdout
                                       AND coalesce(s.last_activity_at, s.created_at) <= s.goodbye_sent_at, false))
               AS refusal,
           NULLIF(@idempotency_key::text, '') IS NOT NULL
               AND EXISTS (SELECT FROM engagement_message_queue q WHERE q.idempotency_key = @idempotency_key::text) AS taken
      FROM (SELECT) AS one
      LEFT JOIN user_profiles p ON p.user_id = @user_id::uuid
      LEFT JOIN user_engagement_states s ON s.user_id = @user_id::uuid
      LEFT JOIN LATERAL engagement_route(p.preferred_destination, p.group_jid, p.whatsapp_jid) route ON true
), queued AS (
    INSERT INTO engagement_message_queue
           (user_id, message_type, message_key, message_params, destination, destination_jid,
            scheduled_for, idempotency_key, period_start, replay_until)
    SELECT @user_id::uuid, @type::text, NULLIF(@key::text, ''), coalesce(@params::text::jsonb, '{}'),
           coalesce(NULLIF(@destination::text, ''), t.destination, 'individual'),
           coalesce(NULLIF(btrim(@jid::text), ''), t.destination_jid),
           coalesce(@scheduled_for::timestamptz, now()), NULLIF(@idempotency_key::text, ''),
           @period_start::timestamptz, @replay_until::timestamptz
      FROM target t
     WHERE t.refusal IS NULL OR t.taken
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL
    DO UPDATE SET idempotency_key = EXCLUDED.idempotency_key
    RETURNING id, xmax, message_type, message_key, message_params, destination, destination_jid
)
SELECT q.id::text, (q.xmax <> 0) AS duplicate,
       q.message_type, coalesce(q.message_key, '') AS message_key, q.message_params, q.destination, q.destination_jid,
       '' AS refusal
  FROM queued q
UNION ALL
SELECT '', false, '', '', '{}'::jsonb, '', '', t.refusal
  FROM target t
 WHERE t.refusal IS NOT NULL AND NOT t.taken
