-- Erase (engagementctl erase, the console's): removes every trace of user
-- @user_id's WhatsApp id and message contents from the scheduler's tables,
-- in one statement, and returns how many rows of each it changed. Runs in
-- the erase's transaction, after the opt-out (which cancelled what was
-- pending and recorded the consent event).
--
-- The user's JIDs are the destination_jid of each of their messages and
-- user_profiles' whatsapp_jid and group_jid; their local parts (the phone
-- number's digits, a group's id) are what is searched for elsewhere.
--   queue: every message of the user is kept, so the funnel's counts
--     (accepted, delivered, read, failed) stay right, but destination_jid
--     becomes '' (the column is NOT NULL), message_params '{}', an
--     error_message '[erased]', provider_message_id NULL (a Cloud API
--     wamid encodes the phone number), an idempotency key holding one of
--     the JIDs NULL (the jobs' keys hold the user id, kind and period; a
--     bot's own key may hold anything); one still pending is cancelled
--     ('opted_out'). One in flight (processing) keeps its status and its
--     claim: its holder checks it again before its request (the erase's
--     opt-out and wish, erase_wish.sql, reach it within 250 ms) and
--     cancels it, or, when its request went out already, records it
--     'sent', as it was (issue 56: cancelled here, its send went
--     unrecorded). That settle finds destination_jid '' and writes no
--     provider id and no error text back (settle.sql).
--   send ledger (engagement_processed_messages): the user's messages'
--     provider ids NULL, errors '[erased]'.
--   send budget: a recipient is md5(destination_jid)::uuid, which a brute
--     force over phone numbers reverses; each of the user's recipients
--     (by their JIDs' MD5, and the rows their messages stamped) gets a
--     random uuid instead, in engagement_send_budget_recipients and in the
--     claims' message_recipients alike, so the slot stays spent (the
--     24-hour cap still counts the send) and the refund still pairs them.
--   engagement_fire_requests: the user's rows deleted (a request key is
--     the bot's text and may hold anything).
--   engagement_console_audit: a row naming the user (their id, a JID, or
--     the phone number however written: phones) keeps its action, actor,
--     count and user id, every other value of its filter and its reason
--     becoming '[erased]'.
--   engagement_idempotency_keys, engagement_job_runs (error, counters): a
--     row holding one of the JIDs (or its local part; in a run's error
--     and counters, the phone number however written) has that value
--     replaced ('[erased]'; a dedupe key is deleted).
-- Kept: user ids (UUIDs, not the WhatsApp id), message keys (catalog
-- keys), the state log, and the consent events (what keeps the user opted
-- out; their source names a door and their actor an operator, never the
-- person, and the jobs' role may not rewrite them).
WITH msgs AS MATERIALIZED (
    SELECT q.id, q.status, q.destination_jid
      FROM engagement_message_queue q
     WHERE q.user_id = @user_id::uuid
     ORDER BY q.id
       FOR UPDATE
), jids AS MATERIALIZED (
    SELECT DISTINCT j
      FROM (SELECT m.destination_jid FROM msgs m
            UNION ALL SELECT p.whatsapp_jid FROM user_profiles p WHERE p.user_id = @user_id::uuid
            UNION ALL SELECT p.group_jid FROM user_profiles p WHERE p.user_id = @user_id::uuid) s(j)
     WHERE j IS NOT NULL AND btrim(j) <> ''
), locals AS MATERIALIZED (
    -- The searched-for parts: the whole JID and its local part, when that
    -- is long enough not to match by chance (a phone number is).
    SELECT DISTINCT s FROM (SELECT j FROM jids UNION ALL SELECT split_part(j, '@', 1) FROM jids) x(s)
     WHERE length(s) >= 6
), phones AS MATERIALIZED (
    -- The phone number of each phone JID (user@s.whatsapp.net, the legacy
    -- @c.us, a bare number; a device suffix ':n' dropped) as digits, to be
    -- found in free text however it is written (phoned, below). A
    -- Brazilian number (55, a two-digit area code, 8 or 9 digits) is
    -- searched for as its national number, area code and subscriber (which
    -- also finds it after +55, a trunk 0 or a carrier code), with and
    -- without a mobile's leading 9 (WhatsApp still names many Brazilian
    -- mobiles without it); any other as its whole international number.
    -- A number written without its area code is not looked for: too many
    -- people share it.
    SELECT DISTINCT v.d
      FROM (SELECT split_part(split_part(j, '@', 1), ':', 1) FROM jids
             WHERE split_part(j, '@', 2) IN ('s.whatsapp.net', 'c.us', '')) p(n)
     CROSS JOIN LATERAL (VALUES
           (CASE WHEN p.n ~ '^55[1-9][0-9][0-9]{8,9}$' THEN substr(p.n, 3) ELSE p.n END),
           (CASE WHEN p.n ~ '^55[1-9][0-9]9[0-9]{8}$' THEN substr(p.n, 3, 2) || substr(p.n, 6)              -- without the 9
                 WHEN p.n ~ '^55[1-9][0-9][6-9][0-9]{7}$' THEN substr(p.n, 3, 2) || '9' || substr(p.n, 5) END) -- with it
     ) v(d)
     WHERE p.n ~ '^[0-9]{8,15}$' AND v.d IS NOT NULL
), phoned AS MATERIALIZED (
    -- The free text holding one of the phones, however punctuated ("+55
    -- (11) 98765-4321", "11 98765.4321"): each run of digits and the
    -- characters numbers are written with (space ( ) . / -), as digits
    -- alone, holds one of them. The audit's filter and reason; the job
    -- runs' error and counters.
    SELECT x.src, x.id
      FROM (SELECT 'audit', a.id, a.filter::text || E'\n' || coalesce(a.reason, '') FROM engagement_console_audit a
            UNION ALL SELECT 'run_error', r.id, r.error FROM engagement_job_runs r WHERE r.error IS NOT NULL
            UNION ALL SELECT 'run_counters', r.id, r.counters::text FROM engagement_job_runs r WHERE r.counters IS NOT NULL
           ) x(src, id, body)
     WHERE EXISTS (SELECT FROM phones)
       AND EXISTS (SELECT FROM regexp_matches(x.body, '[0-9][0-9 ()./-]*[0-9]', 'g') AS m(r), phones p
                    WHERE strpos(regexp_replace(m.r[1], '[^0-9]', '', 'g'), p.d) > 0)
), hashes AS MATERIALIZED (
    SELECT h.old, gen_random_uuid() AS new
      FROM (SELECT md5(j)::uuid FROM jids
            UNION
            SELECT r.recipient FROM engagement_send_budget_recipients r WHERE r.message_id IN (SELECT id FROM msgs)) h(old)
), queue AS (
    UPDATE engagement_message_queue q
       SET destination_jid = '',
           message_params = '{}'::jsonb,
           error_message = CASE WHEN q.error_message IS NULL THEN NULL ELSE '[erased]' END,
           provider_message_id = NULL,
           idempotency_key = CASE WHEN EXISTS (SELECT FROM locals l WHERE strpos(q.idempotency_key, l.s) > 0)
                                  THEN NULL ELSE q.idempotency_key END,
           status = CASE WHEN m.status = 'pending' THEN 'cancelled' ELSE q.status END,
           cancel_reason = CASE WHEN m.status = 'pending' THEN 'opted_out' ELSE q.cancel_reason END,
           deferred_reason = NULL
      FROM msgs m
     WHERE q.id = m.id
    RETURNING m.status = 'pending' AS cancelled
), ledger AS (
    UPDATE engagement_processed_messages l
       SET provider_message_id = NULL,
           error = CASE WHEN l.error IS NULL THEN NULL ELSE '[erased]' END
     WHERE l.message_id IN (SELECT id FROM msgs)
    RETURNING 1
), recipients AS (
    UPDATE engagement_send_budget_recipients r
       SET recipient = h.new
      FROM hashes h
     WHERE r.recipient = h.old
    RETURNING 1
), claims AS (
    UPDATE engagement_send_budget_claims c
       SET message_recipients = (SELECT array_agg(coalesce(h.new, e.r) ORDER BY e.n)
                                   FROM unnest(c.message_recipients) WITH ORDINALITY AS e(r, n)
                                   LEFT JOIN hashes h ON h.old = e.r)
     WHERE c.message_recipients && (SELECT coalesce(array_agg(h.old), '{}') FROM hashes h)
    RETURNING 1
), fire AS (
    DELETE FROM engagement_fire_requests r WHERE r.user_id = @user_id::uuid RETURNING 1
), keys AS (
    DELETE FROM engagement_idempotency_keys k
     WHERE EXISTS (SELECT FROM locals l WHERE strpos(k.key, l.s) > 0)
    RETURNING 1
), audit AS (
    -- An audit row naming the user (their id, or a JID, anywhere in its
    -- filter or reason) keeps its action, actor, count and the user id;
    -- every other value of its filter that is text, a list or an object
    -- (an --error-contains, a JID, ids) becomes '[erased]', its reason too.
    UPDATE engagement_console_audit a
       SET filter = CASE WHEN jsonb_typeof(a.filter) = 'object'
                         THEN (SELECT coalesce(jsonb_object_agg(e.k, CASE WHEN jsonb_typeof(e.v) IN ('string', 'array', 'object')
                                                                               AND e.v <> to_jsonb(@user_id::text)
                                                                          THEN '"[erased]"'::jsonb ELSE e.v END), '{}'::jsonb)
                                 FROM jsonb_each(a.filter) AS e(k, v))
                         ELSE '{"erased": true}'::jsonb END,
           reason = CASE WHEN a.reason IS NULL THEN NULL ELSE '[erased]' END
     WHERE strpos(a.filter::text, @user_id::text) > 0 OR strpos(a.reason, @user_id::text) > 0
        OR EXISTS (SELECT FROM locals l WHERE strpos(a.filter::text, l.s) > 0 OR strpos(a.reason, l.s) > 0)
        OR a.id IN (SELECT p.id FROM phoned p WHERE p.src = 'audit')
    RETURNING 1
), runs AS (
    UPDATE engagement_job_runs r
       SET error = CASE WHEN EXISTS (SELECT FROM locals l WHERE strpos(r.error, l.s) > 0)
                          OR r.id IN (SELECT p.id FROM phoned p WHERE p.src = 'run_error') THEN '[erased]' ELSE r.error END,
           counters = CASE WHEN EXISTS (SELECT FROM locals l WHERE strpos(r.counters::text, l.s) > 0)
                             OR r.id IN (SELECT p.id FROM phoned p WHERE p.src = 'run_counters') THEN '{"erased": true}'::jsonb ELSE r.counters END
     WHERE EXISTS (SELECT FROM locals l WHERE strpos(r.error, l.s) > 0 OR strpos(r.counters::text, l.s) > 0)
        OR r.id IN (SELECT p.id FROM phoned p WHERE p.src IN ('run_error', 'run_counters'))
    RETURNING 1
)
SELECT (SELECT count(*) FROM queue) AS messages,
       (SELECT count(*) FROM queue WHERE cancelled) AS cancelled,
       (SELECT count(*) FROM ledger) AS ledger,
       (SELECT count(*) FROM recipients) AS budget_recipients,
       (SELECT count(*) FROM claims) AS budget_claims,
       (SELECT count(*) FROM fire) AS fire_requests,
       (SELECT count(*) FROM keys) AS idempotency_keys,
       (SELECT count(*) FROM audit) AS console_audit,
       (SELECT count(*) FROM runs) AS job_runs
