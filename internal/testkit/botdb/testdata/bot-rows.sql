-- The bot's rows, as its earlier (TypeScript) scheduler left them, relative
-- to the instant :'as_of' (psql: -v as_of='2026-11-24 12:00:00+00'; botdb
-- substitutes it). One user of every kind the scheduler must handle on the
-- bot's database, each named by the last digits of its id:
--
--   …0001 active, messaged 2 days ago, 3 transactions this week
--   …0002 active, silent 20 days                      (a goodbye is due)
--   …0003 active, no activity recorded, joined 30 days ago (a goodbye is due)
--   …0004 active, no activity recorded, joined 3 days ago  (nothing)
--   …0005 active, silent 20 days, preferred_destination and locale NULL
--   …0006 goodbye_sent a day ago; the old scheduler's goodbye still pending
--   …0007 goodbye_sent 4 days ago; the old scheduler's goodbye sent 4 days ago
--   …0008 remind_later, due yesterday
--   …0009 dormant
--   …0010 active, silent 20 days, opted out
--   …0011 active, messaged today; this week's review already sent by the old scheduler
--   …0012 active, messaged today; a failed old review, retry_count NULL
INSERT INTO users (id, created_at)
SELECT ('00000000-0000-4000-8000-0000000000' || lpad(n::text, 2, '0'))::uuid, :'as_of'::timestamptz - interval '90 days'
  FROM generate_series(1, 12) n;

INSERT INTO user_profiles (user_id, reengagement_opt_out, preferred_destination, whatsapp_jid, locale) VALUES
    ('00000000-0000-4000-8000-000000000001', false, 'individual', '5511900000001@s.whatsapp.net', 'pt-BR'),
    ('00000000-0000-4000-8000-000000000002', false, 'individual', '5511900000002@s.whatsapp.net', 'pt-BR'),
    ('00000000-0000-4000-8000-000000000003', false, 'individual', '5511900000003@s.whatsapp.net', 'en'),
    ('00000000-0000-4000-8000-000000000004', false, 'individual', '5511900000004@s.whatsapp.net', 'pt-BR'),
    ('00000000-0000-4000-8000-000000000005', false, NULL,         '5511900000005@s.whatsapp.net', NULL),
    ('00000000-0000-4000-8000-000000000006', false, 'individual', '5511900000006@s.whatsapp.net', 'pt-BR'),
    ('00000000-0000-4000-8000-000000000007', false, 'individual', '5511900000007@s.whatsapp.net', 'pt-BR'),
    ('00000000-0000-4000-8000-000000000008', false, 'individual', '5511900000008@s.whatsapp.net', 'pt-BR'),
    ('00000000-0000-4000-8000-000000000009', false, 'individual', '5511900000009@s.whatsapp.net', 'pt-BR'),
    ('00000000-0000-4000-8000-000000000010', true,  'individual', '5511900000010@s.whatsapp.net', 'pt-BR'),
    ('00000000-0000-4000-8000-000000000011', false, 'individual', '5511900000011@s.whatsapp.net', 'pt-BR'),
    ('00000000-0000-4000-8000-000000000012', false, 'individual', '5511900000012@s.whatsapp.net', 'pt-BR');

INSERT INTO user_engagement_states (user_id, state, last_activity_at, goodbye_sent_at, goodbye_expires_at, remind_at, created_at) VALUES
    ('00000000-0000-4000-8000-000000000001', 'active',       :'as_of'::timestamptz - interval '2 days',  NULL, NULL, NULL, :'as_of'::timestamptz - interval '90 days'),
    ('00000000-0000-4000-8000-000000000002', 'active',       :'as_of'::timestamptz - interval '20 days', NULL, NULL, NULL, :'as_of'::timestamptz - interval '90 days'),
    ('00000000-0000-4000-8000-000000000003', 'active',       NULL,                                       NULL, NULL, NULL, :'as_of'::timestamptz - interval '30 days'),
    ('00000000-0000-4000-8000-000000000004', 'active',       NULL,                                       NULL, NULL, NULL, :'as_of'::timestamptz - interval '3 days'),
    ('00000000-0000-4000-8000-000000000005', 'active',       :'as_of'::timestamptz - interval '20 days', NULL, NULL, NULL, :'as_of'::timestamptz - interval '90 days'),
    ('00000000-0000-4000-8000-000000000006', 'goodbye_sent', :'as_of'::timestamptz - interval '15 days',
        :'as_of'::timestamptz - interval '1 day', :'as_of'::timestamptz + interval '1 day', NULL, :'as_of'::timestamptz - interval '90 days'),
    ('00000000-0000-4000-8000-000000000007', 'goodbye_sent', :'as_of'::timestamptz - interval '18 days',
        :'as_of'::timestamptz - interval '4 days', :'as_of'::timestamptz - interval '2 days', NULL, :'as_of'::timestamptz - interval '90 days'),
    ('00000000-0000-4000-8000-000000000008', 'remind_later', :'as_of'::timestamptz - interval '16 days',
        NULL, NULL, :'as_of'::timestamptz - interval '1 day', :'as_of'::timestamptz - interval '90 days'),
    ('00000000-0000-4000-8000-000000000009', 'dormant',      :'as_of'::timestamptz - interval '40 days', NULL, NULL, NULL, :'as_of'::timestamptz - interval '90 days'),
    ('00000000-0000-4000-8000-000000000010', 'active',       :'as_of'::timestamptz - interval '20 days', NULL, NULL, NULL, :'as_of'::timestamptz - interval '90 days'),
    ('00000000-0000-4000-8000-000000000011', 'active',       :'as_of'::timestamptz - interval '1 hour',  NULL, NULL, NULL, :'as_of'::timestamptz - interval '90 days'),
    ('00000000-0000-4000-8000-000000000012', 'active',       :'as_of'::timestamptz - interval '1 hour',  NULL, NULL, NULL, :'as_of'::timestamptz - interval '90 days');

INSERT INTO transactions (user_id, amount, description, created_at)
SELECT '00000000-0000-4000-8000-000000000001', 10 * n, 'mercado', :'as_of'::timestamptz - n * interval '1 day'
  FROM generate_series(1, 3) n;
INSERT INTO transactions (user_id, amount, description, created_at) VALUES
    ('00000000-0000-4000-8000-000000000011', 25, 'farmácia', :'as_of'::timestamptz - interval '2 hours'),
    ('00000000-0000-4000-8000-000000000002', 99, 'aluguel',  :'as_of'::timestamptz - interval '30 days');

-- The old scheduler's queue, under the same key formats. Its goodbyes
-- leave message_params NULL, its pending goodbye and failed review
-- retry_count.
INSERT INTO engagement_message_queue
       (user_id, message_type, message_key, message_params, destination, destination_jid,
        scheduled_for, sent_at, status, retry_count, error_message, idempotency_key, created_at) VALUES
    ('00000000-0000-4000-8000-000000000006', 'goodbye', 'engagement.goodbye.self_select', NULL,
        'individual', '5511900000006@s.whatsapp.net', :'as_of'::timestamptz - interval '1 day', NULL, 'pending', NULL, NULL,
        '00000000-0000-4000-8000-000000000006:goodbye_sent:' || to_char((:'as_of'::timestamptz - interval '1 day') AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
        :'as_of'::timestamptz - interval '1 day'),
    ('00000000-0000-4000-8000-000000000007', 'goodbye', 'engagement.goodbye.self_select', NULL,
        'individual', '5511900000007@s.whatsapp.net', :'as_of'::timestamptz - interval '4 days',
        :'as_of'::timestamptz - interval '4 days', 'sent', 0, NULL,
        '00000000-0000-4000-8000-000000000007:goodbye_sent:' || to_char((:'as_of'::timestamptz - interval '4 days') AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
        :'as_of'::timestamptz - interval '4 days'),
    ('00000000-0000-4000-8000-000000000011', 'weekly_review', 'engagement.weekly_review.celebration', '{"count": "1"}',
        'individual', '5511900000011@s.whatsapp.net', :'as_of'::timestamptz - interval '1 hour',
        :'as_of'::timestamptz - interval '1 hour', 'sent', 0, NULL,
        '00000000-0000-4000-8000-000000000011:weekly_review:' || to_char(:'as_of'::timestamptz AT TIME ZONE 'UTC', 'IYYY-"W"IW'),
        :'as_of'::timestamptz - interval '1 hour'),
    ('00000000-0000-4000-8000-000000000012', 'weekly_review', 'engagement.weekly_review.celebration', '{"count": "2"}',
        'individual', '5511900000012@s.whatsapp.net', :'as_of'::timestamptz - interval '8 days',
        NULL, 'failed', NULL, 'timeout',
        '00000000-0000-4000-8000-000000000012:weekly_review:' || to_char((:'as_of'::timestamptz - interval '8 days') AT TIME ZONE 'UTC', 'IYYY-"W"IW'),
        :'as_of'::timestamptz - interval '8 days');
