-- The generator's session: settings for one bulk load, and the helpers every
-- later step calls. It runs on each of Seed's own connections (closed
-- afterwards), so nothing here outlives the load: not the settings, not the
-- pg_temp functions, not the cd_* temporary tables the first steps build.
--
-- TimeZone is UTC because the keys name UTC days and ISO weeks and the
-- daily job's runs are at 06:00 UTC. temp_buffers must be set before the
-- first temporary table is touched: the staging tables hold a few hundred
-- megabytes at a million users, and the default 8 MB would push every page
-- of them through the kernel.
SET TimeZone = 'UTC';
SET synchronous_commit = off;
SET work_mem = '512MB';
SET maintenance_work_mem = '512MB';
SET temp_buffers = '1GB';
SET jit = off;
SET synchronize_seqscans = off;
SET statement_timeout = 0;
SET lock_timeout = 0;
-- Memoize would cache the per-message subqueries of the queue step, whose
-- keys never repeat: pure overhead.
SET enable_memoize = off;

-- A uniform draw in [0, 1), the same for the same (key, stream) on every
-- run and server: the generator's only source of randomness. A stream is
-- one independent question asked of a key (a user's category, a step's
-- delay, a message's outcome...).
--
-- Each helper is plain SQL without FROM, declared exactly as volatile as
-- its body (extract and date arithmetic on timestamptz are STABLE), so the
-- planner inlines it into the statements: a call it cannot inline costs a
-- function execution per row, which made the load five times slower. For
-- the same reason the steps pass helpers that use an argument more than
-- once a column, not an expression.
CREATE FUNCTION pg_temp.cd_u(key bigint, stream bigint) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (hashint8extended(key, stream) & 2147483647)::double precision / 2147483648 $$;

-- The UTC day number of t (days since 1970-01-01).
CREATE FUNCTION pg_temp.cd_day(t timestamptz) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT floor(date_part('epoch', t) / 86400)::bigint $$;

-- The as-of of the last engagement-daily run at or before t: the cron
-- schedule is 06:00 UTC every day (railway.cron.yml).
CREATE FUNCTION pg_temp.cd_run(t timestamptz) RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT to_timestamp(floor((date_part('epoch', t) - 21600) / 86400) * 86400 + 21600) $$;

-- Whether the 06:00 run of the day of run failed (about one day in 40) and
-- an operator ran it again half an hour later: that second run did the
-- day's work.
CREATE FUNCTION pg_temp.cd_failed(run timestamptz) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT pg_temp.cd_u(pg_temp.cd_day(run), 51) < 0.025 $$;

-- When the daily run that did the work of run's day started: a few seconds
-- after its as-of, or after the failed first attempt.
CREATE FUNCTION pg_temp.cd_started(run timestamptz) RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT run + (CASE WHEN pg_temp.cd_failed(run) THEN 1860 ELSE 0 END
                        + 3 + 15 * pg_temp.cd_u(pg_temp.cd_day(run), 50)) * interval '1 second' $$;

-- When the engagement-weekly run of as-of w (Monday 09:00 UTC) started.
CREATE FUNCTION pg_temp.cd_wstarted(w timestamptz) RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT w + (2 + 10 * pg_temp.cd_u(pg_temp.cd_day(w), 60)) * interval '1 second' $$;

-- User i's last activity before the daily run run sent them a goodbye: the
-- job catches a user on the first run after 14 days of silence, so it lies
-- in the day before run - 14 days. Every step that needs it (the user's
-- state row, the log's earlier moves) asks this one function, so they agree
-- however the history was cut.
CREATE FUNCTION pg_temp.cd_la(i bigint, run timestamptz) RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT run - interval '14 days'
                 - (1 + 1380 * pg_temp.cd_u(i * 100003 + pg_temp.cd_day(run), 5)) * interval '1 minute' $$;

-- Where queue-process's quiet hours (21:00-09:00 in the user's zone, as
-- railway.cron.yml runs it) put a message claimed at t: t itself outside
-- them, else the next 09:00 local (the claim moves scheduled_for there).
CREATE FUNCTION pg_temp.cd_defer(t timestamptz, tz text) RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN (t AT TIME ZONE tz)::time >= time '21:00' OR (t AT TIME ZONE tz)::time < time '09:00'
                      THEN (date_trunc('day', (t AT TIME ZONE tz) + interval '3 hours') + interval '9 hours') AT TIME ZONE tz
                      ELSE t END $$;
