-- Least-privilege roles for the engagement scheduler.
--
--   engagement_migrator  LOGIN   owns the scheduler's tables; runs
--                                `engagementctl migrate up|down` and nothing else
--   engagement_jobs      NOLOGIN the privileges the binaries use, and no more
--   engagement_app       LOGIN   member of engagement_jobs: the DATABASE_URL of
--                                engagement-daily, engagement-weekly, queue-process,
--                                engagement-console
--                                and engagementctl enqueue|cleanup|status|verify|
--                                opt-out|opt-in|erase
--   engagement_bot       NOLOGIN EXECUTE on engagement_fire, engagement_receipt,
--                                engagement_opt_out and engagement_opt_in and nothing
--                                else: make
--                                the bot's own login role a member of it
--                                (GRANT engagement_bot TO <the bot's role>)
--
-- What engagement_jobs may do, table by table (and nothing else: no DDL, no
-- TRUNCATE, no TRIGGER or REFERENCES, no table it is not listed on):
--
--   user_profiles                  SELECT                          the bot owns profiles
--   transactions                   SELECT                          the bot writes them
--   user_engagement_states         SELECT, UPDATE                  the daily job moves states
--   engagement_state_transitions   SELECT, INSERT, DELETE          the log grows, never changes;
--                                                                  cleanup's horizon deletes
--   engagement_message_queue       SELECT, INSERT, UPDATE, DELETE  queue, claim, settle; cleanup deletes
--   engagement_processed_messages  SELECT, INSERT, UPDATE, DELETE  the send ledger; cleanup deletes
--   engagement_transport_pacing    SELECT, INSERT, UPDATE          the shared send pace
--   engagement_idempotency_keys    SELECT, INSERT, UPDATE, DELETE  --dedupe-store postgres; cleanup
--   engagement_job_runs            SELECT, INSERT, UPDATE, DELETE  run records; cleanup's horizon deletes
--   engagement_queue_holders       SELECT, INSERT, UPDATE, DELETE  live queue-process leases
--   engagement_time_zones          SELECT                          zone names, for quiet hours
--   engagement_schema_migrations   SELECT                          every binary checks the version
--   engagement_adopted_tables      SELECT                          which tables were the bot's
--   engagement_fire_requests       SELECT, DELETE                  the bot's request keys; cleanup
--   engagement_console_audit       SELECT, INSERT, UPDATE, DELETE  the console's audit log; erase scrubs
--                                                                  the rows naming the person, cleanup's
--                                                                  horizon deletes (UPDATE could blank a
--                                                                  row already: DELETE gives no new power)
--   engagement_send_budgets        SELECT, INSERT, UPDATE          the send budget per transport
--   engagement_send_budget_recipients
--                                  SELECT, INSERT, UPDATE, DELETE  who is in the budget's window;
--                                                                  claims drop who left it
--   engagement_send_budget_claims  SELECT, INSERT, UPDATE, DELETE  slots spent with room to spare;
--                                                                  claims drop the old ones
--   engagement_consent_events      SELECT, DELETE                  consent history: the calls write it,
--                                                                  cleanup and erase delete
--   engagement_consent_newest      SELECT                          each user's newest wish: the calls write it
--   engagement_receipt_inbox       SELECT, DELETE                  receipts that came before their send:
--                                                                  engagement_receipt keeps them, cleanup deletes
--   engagement_receipt_gate        SELECT                          empty at rest: where a receipt and its send meet
--   engagement_number_health       SELECT, INSERT, UPDATE          Meta's verdict on the number (queue-process,
--                                                                  the console's webhook)
--   engagement_template_status     SELECT, INSERT, UPDATE          templates Meta paused (the webhook)
--   engagement_template_categories SELECT, INSERT, UPDATE          each template's latest Meta category
--                                                                  (queue-process, the console's webhook)
--   engagement_number_throughput   SELECT, INSERT, UPDATE          Meta's throughput level per Cloud API
--                                                                  number (queue-process)
--   engagement_queue_settings      SELECT, INSERT, UPDATE          what queue-process last ran with, per
--                                                                  transport (the console and status read it)
--   engagement_message_types       SELECT, INSERT, UPDATE, DELETE  the operator's categories for message
--                                                                  types (engagementctl categories)
--   engagement_erasures            SELECT, INSERT, UPDATE          who was erased (erase), which every door reads
--   engagement_wishes              SELECT, INSERT, DELETE          opt-outs and erasures for the batches in
--                                                                  flight: erase writes, queue-process reads
--                                                                  and deletes the old ones
--   engagement_transport_pauses    SELECT, INSERT, UPDATE          account-wide refusals of a transport:
--                                                                  queue-process records and reads them,
--                                                                  engagementctl pause clear ends one
--
-- Row level security: the migrations switch it on for every table they
-- create, and the bot's tables on Supabase have it on already, so a role
-- without BYPASSRLS sees no row of a table unless a policy lets it. This
-- script gives engagement_jobs one policy on each table above (named after
-- the role, FOR ALL, USING (true)): its privileges, not the policy, say what
-- it may do. Every binary refuses to run as a role that row level security
-- would leave looking at empty tables. engagement_jobs also gets EXECUTE on
-- the scheduler's functions, which the migrations take from PUBLIC.
--
-- On the bot's database (where `migrate up` adopted the bot's tables) no
-- table changes owner: the bot's stay the bot's, and the scheduler's stay
-- with the role that created them, so run `engagementctl migrate` as the
-- role that owns the bot's tables (on Supabase, postgres); the script then
-- says so, and engagement_migrator goes unused.
--
-- The jobs' advisory locks (pg_advisory_lock) need no grant. Inserting into
-- the identity columns needs no sequence privilege.
--
-- Run it with psql, as a superuser or as the role that owns the tables
-- (it hands them to the migrator), on the database the scheduler uses:
--
--   psql "$ADMIN_DATABASE_URL" -v ON_ERROR_STOP=1 -f deploy/sql/roles.sql
--
-- It is idempotent: run it again at any time, and after every release whose
-- migrations add a table (the table gets its privileges then; until then
-- the jobs get "permission denied" on it and exit 1). On an empty database,
-- run it once to create the roles, then `engagementctl migrate up` as the
-- migrator, then this script again; it says which tables it did not find.
-- A re-run resets engagement_jobs' privileges on every table of the schema
-- to exactly the list above.
--
-- psql variables (-v NAME=VALUE), all optional:
--
--   app_role, jobs_role, migrator_role,
--   bot_role                             role names (defaults above)
--   schema                               the scheduler's schema (public)
--   app_password, migrator_password      set the login roles' passwords; empty
--                                        (the default) leaves them as they are
--
-- Passwords: prefer leaving them out here and setting them with psql's
-- \password ROLE, which sends only a SCRAM hash. A password given here is
-- sent in a SET LOCAL that psql does not echo and that lasts only for this
-- script's transaction; servers logging every statement (log_statement =
-- 'all') would log it. Put the passwords in the DATABASE_URL secrets, never
-- in this file.
--
-- PostgreSQL 14 and older let every role (PUBLIC) create objects in schema
-- public, so engagement_app could create tables there. This script does not
-- change what PUBLIC may do, since other applications may share the
-- database; where nothing else needs it, run
--   REVOKE CREATE ON SCHEMA public FROM PUBLIC;
-- (PostgreSQL 15 and newer do that by default).
--
-- TLS: the roles do not enforce it; pg_hba.conf does. Use hostssl lines for
-- these roles, and sslmode=verify-full (or require) in their URLs.
--
-- Statements outside the psql meta-commands below are plain SQL: the
-- tests (deploy/roles_test.go) substitute the variables themselves and run
-- the script on a real server.

\set ON_ERROR_STOP on
\if :{?app_role}
\else
\set app_role engagement_app
\endif
\if :{?jobs_role}
\else
\set jobs_role engagement_jobs
\endif
\if :{?migrator_role}
\else
\set migrator_role engagement_migrator
\endif
\if :{?bot_role}
\else
\set bot_role engagement_bot
\endif
\if :{?schema}
\else
\set schema public
\endif
\if :{?app_password}
\else
\set app_password ''
\endif
\if :{?migrator_password}
\else
\set migrator_password ''
\endif

BEGIN;

SET LOCAL engagement_roles.app_role = :'app_role';
SET LOCAL engagement_roles.jobs_role = :'jobs_role';
SET LOCAL engagement_roles.migrator_role = :'migrator_role';
SET LOCAL engagement_roles.bot_role = :'bot_role';
SET LOCAL engagement_roles.schema = :'schema';
SET LOCAL engagement_roles.app_password = :'app_password';
SET LOCAL engagement_roles.migrator_password = :'migrator_password';

DO $roles$
DECLARE
    app      text := current_setting('engagement_roles.app_role');
    jobs     text := current_setting('engagement_roles.jobs_role');
    migrator text := current_setting('engagement_roles.migrator_role');
    bot      text := current_setting('engagement_roles.bot_role');
    sch      text := current_setting('engagement_roles.schema');
    app_pw   text := current_setting('engagement_roles.app_password');
    mig_pw   text := current_setting('engagement_roles.migrator_password');
    -- The scheduler's tables and what engagement_jobs may do on each: the
    -- one list this script grants from (see the table in the header).
    grants   text[][] := ARRAY[
        ['user_profiles',                 'SELECT'],
        ['transactions',                  'SELECT'],
        ['user_engagement_states',        'SELECT, UPDATE'],
        ['engagement_state_transitions',  'SELECT, INSERT, DELETE'],
        ['engagement_message_queue',      'SELECT, INSERT, UPDATE, DELETE'],
        ['engagement_processed_messages', 'SELECT, INSERT, UPDATE, DELETE'],
        ['engagement_transport_pacing',   'SELECT, INSERT, UPDATE'],
        ['engagement_idempotency_keys',   'SELECT, INSERT, UPDATE, DELETE'],
        ['engagement_job_runs',           'SELECT, INSERT, UPDATE, DELETE'],
        ['engagement_queue_holders',      'SELECT, INSERT, UPDATE, DELETE'],
        ['engagement_time_zones',         'SELECT'],
        ['engagement_schema_migrations',  'SELECT'],
        ['engagement_adopted_tables',     'SELECT'],
        ['engagement_fire_requests',      'SELECT, DELETE'],
        ['engagement_console_audit',      'SELECT, INSERT, UPDATE, DELETE'],
        ['engagement_send_budgets',       'SELECT, INSERT, UPDATE'],
        ['engagement_send_budget_recipients', 'SELECT, INSERT, UPDATE, DELETE'],
        ['engagement_send_budget_claims', 'SELECT, INSERT, UPDATE, DELETE'],
        ['engagement_consent_events',     'SELECT, DELETE'],
        ['engagement_consent_newest',     'SELECT'],
        ['engagement_receipt_inbox',      'SELECT, DELETE'],
        ['engagement_receipt_gate',       'SELECT'],
        ['engagement_number_health',      'SELECT, INSERT, UPDATE'],
        ['engagement_template_status',    'SELECT, INSERT, UPDATE'],
        ['engagement_template_categories', 'SELECT, INSERT, UPDATE'],
        ['engagement_number_throughput',  'SELECT, INSERT, UPDATE'],
        ['engagement_queue_settings',     'SELECT, INSERT, UPDATE'],
        ['engagement_message_types',      'SELECT, INSERT, UPDATE, DELETE'],
        ['engagement_erasures',           'SELECT, INSERT, UPDATE'],
        ['engagement_wishes',             'SELECT, INSERT, DELETE'],
        ['engagement_transport_pauses',   'SELECT, INSERT, UPDATE']
    ];
    -- The scheduler's functions (its migrations' trigger functions, the
    -- shard predicate, the routing, the clocks and deadlines the jobs decide
    -- by and the end of the quiet hours the claim defers to): the migrator
    -- owns them too, so it can drop or replace them.
    funcs    text[] := ARRAY['engagement_stamp_state_change()',
                             'engagement_claim_abandoned(text, timestamptz, timestamptz)',
                             'engagement_zone(text)',
                             'engagement_in_shard(uuid, integer, integer)',
                             'engagement_holdout_bucket(text, uuid)',
                             'engagement_inactivity_due(timestamptz, interval, timestamptz, timestamptz, timestamptz, timestamptz)',
                             'engagement_inactivity_due(timestamptz, interval, timestamptz, timestamptz, timestamptz, timestamptz, timestamptz)',
                             'engagement_failure_code(text)',
                             'engagement_goodbye_due(timestamptz, interval, boolean, timestamptz, timestamptz, text, boolean, timestamptz, timestamptz, timestamptz)',
                             'engagement_receipt(text, text, timestamptz, text)',
                             'engagement_receipt_gate_pass(text)',
                             'engagement_receipt_inbox_apply()',
                             'engagement_note_wish()',
                             'engagement_consent(uuid, boolean, text, timestamptz, text)',
                             'engagement_consent_record(uuid, boolean, text, timestamptz, text, boolean)',
                             'engagement_opt_out(uuid, text, timestamptz, text, boolean)',
                             'engagement_opt_in(uuid, text, timestamptz, text)',
                             'engagement_clock(text, timestamptz, timestamptz, timestamptz, timestamptz, timestamptz)',
                             'engagement_route(text, text, text)',
                             'engagement_send_route(uuid)',
                             'engagement_error_group(text)',
                             'engagement_quiet_until(timestamptz, text, interval, interval)',
                             'engagement_send_budget_full()',
                             'engagement_refusal(text, boolean, boolean, boolean)',
                             'engagement_service_window_open(timestamptz, timestamptz)',
                             'engagement_confirmation_guard()'];
    -- The bot's moves: EXECUTE for the bot's role alone (not the jobs').
    bot_funcs text[] := ARRAY['engagement_fire(uuid, text, timestamptz, text)',
                              'engagement_receipt(text, text, timestamptz, text)',
                              'engagement_opt_out(uuid, text, timestamptz, text, boolean)',
                              'engagement_opt_in(uuid, text, timestamptz, text)'];
    f        text;
    fn       regprocedure;
    tbl      regclass;
    missing  text[] := '{}';
    adopted  boolean := false;
BEGIN
    IF app = '' OR jobs = '' OR migrator = '' OR bot = '' OR sch = ''
       OR app = jobs OR app = migrator OR jobs = migrator OR bot IN (app, jobs, migrator) THEN
        RAISE EXCEPTION 'roles.sql: app_role, jobs_role, migrator_role and bot_role must be four different non-empty names, and schema non-empty';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_namespace WHERE nspname = sch) THEN
        RAISE EXCEPTION 'roles.sql: schema % does not exist in database %', sch, current_database();
    END IF;

    -- Roles: created when missing; their attributes set on every run, so a
    -- role created by hand ends up the same.
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = jobs) THEN
        EXECUTE format('CREATE ROLE %I', jobs);
    END IF;
    EXECUTE format('ALTER ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', jobs);

    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = app) THEN
        EXECUTE format('CREATE ROLE %I', app);
    END IF;
    EXECUTE format('ALTER ROLE %I LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', app);
    IF NOT EXISTS (SELECT FROM pg_auth_members m
                    WHERE m.roleid = (SELECT oid FROM pg_roles WHERE rolname = jobs)
                      AND m.member = (SELECT oid FROM pg_roles WHERE rolname = app)) THEN
        EXECUTE format('GRANT %I TO %I', jobs, app);
    END IF;

    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = bot) THEN
        EXECUTE format('CREATE ROLE %I', bot);
    END IF;
    EXECUTE format('ALTER ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', bot);

    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = migrator) THEN
        EXECUTE format('CREATE ROLE %I', migrator);
    END IF;
    EXECUTE format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', migrator);

    IF app_pw <> '' THEN
        EXECUTE format('ALTER ROLE %I PASSWORD %L', app, app_pw);
    END IF;
    IF mig_pw <> '' THEN
        EXECUTE format('ALTER ROLE %I PASSWORD %L', migrator, mig_pw);
    END IF;

    -- The database and the schema: both roles connect; only the migrator
    -- creates objects.
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I, %I', current_database(), jobs, migrator);
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', sch, jobs);
    EXECUTE format('GRANT USAGE, CREATE ON SCHEMA %I TO %I', sch, migrator);

    -- Start from nothing on every table and sequence of the schema, so a
    -- re-run also takes back what the list no longer grants.
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', sch, jobs);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM %I', sch, jobs);

    -- The bot's database: migrate up recorded the bot's tables it adopted.
    tbl := to_regclass(format('%I.engagement_adopted_tables', sch));
    IF tbl IS NOT NULL THEN
        EXECUTE format('SELECT EXISTS (SELECT FROM %s)', tbl) INTO adopted;
    END IF;

    FOR i IN 1 .. array_length(grants, 1) LOOP
        tbl := to_regclass(format('%I.%I', sch, grants[i][1]));
        IF tbl IS NULL THEN
            missing := missing || grants[i][1];
            CONTINUE;
        END IF;
        -- The migrator owns every table (with its indexes and identity
        -- sequences), so it can migrate them; the jobs own nothing.
        IF NOT adopted AND (SELECT relowner FROM pg_class WHERE oid = tbl) <> (SELECT oid FROM pg_roles WHERE rolname = migrator) THEN
            EXECUTE format('ALTER TABLE %s OWNER TO %I', tbl, migrator);
        END IF;
        EXECUTE format('GRANT %s ON TABLE %s TO %I', grants[i][2], tbl, jobs);
        IF EXISTS (SELECT FROM pg_policy WHERE polrelid = tbl AND polname = jobs) THEN
            EXECUTE format('DROP POLICY %I ON %s', jobs, tbl); -- made again as this script says now
        END IF;
        EXECUTE format('CREATE POLICY %I ON %s AS PERMISSIVE FOR ALL TO %I USING (true) WITH CHECK (true)', jobs, tbl, jobs);
    END LOOP;
    -- Each function to the roles that call it: the bot's moves to the bot,
    -- the rest to the jobs; receipts to both (the bot forwards acks, the
    -- console takes Meta's webhooks).
    FOREACH f IN ARRAY ARRAY(SELECT DISTINCT unnest(funcs || bot_funcs)) LOOP
        fn := to_regprocedure(format('%I.%s', sch, f));
        IF fn IS NULL THEN
            CONTINUE;
        END IF;
        IF NOT adopted AND (SELECT proowner FROM pg_proc WHERE oid = fn) <> (SELECT oid FROM pg_roles WHERE rolname = migrator) THEN
            EXECUTE format('ALTER FUNCTION %s OWNER TO %I', fn, migrator);
        END IF;
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM %I, %I', fn, jobs, bot);
        IF f = ANY(bot_funcs) THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fn, bot);
        END IF;
        IF f = ANY(funcs) THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fn, jobs);
        END IF;
    END LOOP;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', sch, bot);
    IF adopted THEN
        RAISE NOTICE 'roles.sql: this is the bot''s database (migrate up adopted its tables): every table keeps its owner; run `engagementctl migrate` as the role that owns the bot''s tables (on Supabase, postgres), not as %.', migrator;
    END IF;

    IF cardinality(missing) > 0 THEN
        RAISE NOTICE 'roles.sql: % table(s) not found in schema %: %. Run `engagementctl migrate up` as % and then this script again.',
            cardinality(missing), sch, array_to_string(missing, ', '), migrator;
    END IF;
END
$roles$;

COMMIT;
