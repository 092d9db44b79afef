#!/bin/sh
# engagement_fire's cost inside the database (issue 61, docs/BENCHMARKS.md
# "The user's hour"): migration 45's function (no hours), migration 85's
# (the hours in the user's zone, read from the profile) and today's
# (migration 87: the hours in UTC), each on its own copy of the same users'
# rows (schemas f45, f85 and public), called for the same user one after
# the other, in a rotating order, each call timed with clock_timestamp() in
# a PL/pgSQL loop and committed on its own, so the machine's load falls on
# the three alike. Each user writes ROUNDS times, a week apart. Prints each
# one's median (and the median of the messages after each user's first,
# which starts the histogram) and p99 in µs, and the tables' HOT updates.
#
#   scripts/fire-inner-bench.sh ADMIN_URL [USERS] [ROUNDS]
#
# ADMIN_URL: a scratch server's URL (its database is only used to create
# and drop fire_inner_bench). Needs engagementctl on PATH or ENGAGEMENTCTL.
set -eu
admin=$1
users=${2:-3000}
rounds=${3:-3}
ctl=${ENGAGEMENTCTL:-engagementctl}
here=$(cd "$(dirname "$0")/.." && pwd)
db=fire_inner_bench
url=$(printf '%s' "$admin" | sed -E "s#^(postgres(ql)?://[^/]*)/[^?]*#\1/$db#")
psql "$admin" -Xqc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
"$ctl" migrate up --database-url "$url" >/dev/null

# A function's text from a migration: from its CREATE to the DO block after it.
fn() {
	awk '/^CREATE OR REPLACE FUNCTION engagement_fire/ {on=1} on && /^DO \$\$/ {exit} on' "$1"
}

{
	cat <<EOF
INSERT INTO user_profiles (user_id, whatsapp_jid, timezone)
SELECT u, 'bench' || i || '@s.whatsapp.net',
       CASE WHEN i % 5 <> 0 THEN 'America/Sao_Paulo' END
  FROM generate_series(1, $users) i, LATERAL (SELECT md5(i::text)::uuid AS u) x;
INSERT INTO user_engagement_states (user_id, state, last_activity_at)
SELECT user_id, 'active', now() - interval '30 days' FROM user_profiles;
CREATE SCHEMA f45;
CREATE SCHEMA f85;
CREATE TABLE f45.user_engagement_states (LIKE public.user_engagement_states INCLUDING ALL);
ALTER TABLE f45.user_engagement_states DROP COLUMN message_hours, DROP COLUMN message_hours_at,
    DROP COLUMN message_hour, DROP COLUMN recent_messages;
CREATE TABLE f85.user_engagement_states (LIKE public.user_engagement_states INCLUDING ALL);
DO \$\$
DECLARE cols text := (SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
                       WHERE attrelid = 'f45.user_engagement_states'::regclass AND attnum > 0 AND NOT attisdropped);
BEGIN
    EXECUTE format('INSERT INTO f45.user_engagement_states (%s) SELECT %s FROM public.user_engagement_states', cols, cols);
END
\$\$;
INSERT INTO f85.user_engagement_states SELECT * FROM public.user_engagement_states;
CREATE TABLE f45.engagement_state_transitions (LIKE public.engagement_state_transitions INCLUDING ALL);
CREATE TABLE f85.engagement_state_transitions (LIKE public.engagement_state_transitions INCLUDING ALL);
CREATE TABLE f45.engagement_fire_requests (LIKE public.engagement_fire_requests INCLUDING ALL);
CREATE TABLE f85.engagement_fire_requests (LIKE public.engagement_fire_requests INCLUDING ALL);
SET search_path = f45, public;
EOF
	fn "$here/migrations/000085_user_hours.down.sql"
	echo "SET search_path = f85, public;"
	fn "$here/migrations/000085_user_hours.up.sql"
	cat <<'EOF'
RESET search_path;
ALTER FUNCTION f45.engagement_fire(uuid, text, timestamptz, text) SET search_path = f45, public, pg_temp;
ALTER FUNCTION f85.engagement_fire(uuid, text, timestamptz, text) SET search_path = f85, public, pg_temp;
VACUUM ANALYZE;
CREATE TABLE public.fire_timings (arm text, round int, us float8);
EOF
} | psql "$url" -Xq -v ON_ERROR_STOP=1

psql "$url" -Xq -v ON_ERROR_STOP=1 <<EOF
DO \$\$
DECLARE
    ids uuid[] := ARRAY(SELECT user_id FROM public.user_profiles ORDER BY user_id);
    arms text[] := ARRAY['f45', 'f85', 'public'];
    t0 timestamptz;
    at timestamptz;
    k int := 0;
    a int;
BEGIN
    FOR r IN 1..$rounds LOOP
        FOR i IN 1..cardinality(ids) LOOP
            at := now() - make_interval(days => 7 * ($rounds - r), hours => i % 24);
            FOR j IN 0..2 LOOP
                a := (k + j) % 3 + 1;
                t0 := clock_timestamp();
                IF a = 1 THEN
                    PERFORM f45.engagement_fire(ids[i], 'user_message', at);
                ELSIF a = 2 THEN
                    PERFORM f85.engagement_fire(ids[i], 'user_message', at);
                ELSE
                    PERFORM public.engagement_fire(ids[i], 'user_message', at);
                END IF;
                INSERT INTO public.fire_timings VALUES (arms[a], r, extract(epoch FROM clock_timestamp() - t0) * 1e6);
            END LOOP;
            k := k + 1;
            COMMIT;
        END LOOP;
    END LOOP;
END
\$\$;
EOF

psql "$url" -X <<'EOF'
SELECT CASE arm WHEN 'f45' THEN '45: no hours' WHEN 'f85' THEN '85: hours in the zone' ELSE '87: hours in UTC' END AS engagement_fire,
       count(*) AS calls,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY us)::numeric, 1) AS median_us,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY us) FILTER (WHERE round > 1))::numeric, 1) AS later_median_us,
       round(percentile_cont(0.99) WITHIN GROUP (ORDER BY us)::numeric, 1) AS p99_us
  FROM fire_timings GROUP BY arm ORDER BY arm;
SELECT pg_stat_force_next_flush();
SELECT schemaname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
 WHERE relname = 'user_engagement_states' ORDER BY schemaname;
EOF
psql "$admin" -Xqc "DROP DATABASE IF EXISTS $db"
