#!/usr/bin/env bash
# What one delivered message costs PostgreSQL, counted rather than timed, so
# that a busy machine gives the same figures as a quiet one (issue 59,
# docs/BENCHMARKS.md "What a message costs the database"): queue-process,
# unpaced, delivers MESSAGES due weekly reviews to 1,000 seeded users
# through the log transport (no request: the queue alone, as the bench's
# no-op run), and the script prints, per message, the WAL written, the
# rows inserted, updated (HOT or not) and deleted per table, and, when the
# server's data directory is readable here and pg_waldump is installed,
# the WAL records by kind (index insertions, row locks, …). It also
# prints the CPU time per message of queue-process (its rusage) and of
# the PostgreSQL server (its processes' utime and stime from /proc, the
# postmaster's reaped children included, when the server's data directory
# is readable here: the whole server's, so run it where nothing else uses
# that server), and, where pg_stat_statements is loaded, the statements'
# execution time per message.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres scripts/wal-per-message.sh [BIN_DIR] [MESSAGES]
#
# BIN_DIR is the built binaries (make build; default bin), MESSAGES 20000.
# It creates and drops the database engagement_walcount on DATABASE_URL's
# server. Never point it at a production server.
set -euo pipefail
bin=${1:-bin}
n=${2:-20000}
: "${DATABASE_URL:?set DATABASE_URL to a server the script may create a database on}"
db=engagement_walcount
base=${DATABASE_URL%%\?*}
query=${DATABASE_URL#"$base"}
url="${base%/*}/$db$query"

export PGOPTIONS="-c client_min_messages=warning"
psql -qX "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
trap 'psql -qX "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $db" >/dev/null' EXIT
"$bin/engagementctl" migrate up --database-url "$url" >/dev/null 2>&1
"$bin/engagementctl" seed --database-url "$url" --users 1000 --as-of "$(date -u +%Y-%m-%dT%H:00:00Z)" >/dev/null
# The bench tool's queue (bench/queue.go, seedQueue): n due weekly reviews
# over the users still eligible when they are sent.
psql -qX "$url" -v n="$n" <<'SQL'
INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
       destination_jid, scheduled_for, idempotency_key)
SELECT p.user_id, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual',
       p.whatsapp_jid, now() - interval '1 minute', p.user_id::text || ':weekly_review:' || g.i
  FROM generate_series(1, :n) g(i)
  JOIN (SELECT e.user_id, e.whatsapp_jid, row_number() OVER (ORDER BY e.user_id) - 1 AS k, count(*) OVER () AS users
          FROM (SELECT p.user_id, p.whatsapp_jid
                  FROM user_profiles p
                  JOIN user_engagement_states s ON s.user_id = p.user_id
                 WHERE p.whatsapp_jid IS NOT NULL AND NOT p.reengagement_opt_out
                   AND s.state NOT IN ('goodbye_sent', 'remind_later', 'dormant')
                   AND s.last_activity_at > now() - interval '27 days') e) p ON p.k = g.i % p.users;
VACUUM ANALYZE;
SELECT pg_stat_reset() \g /dev/null
CHECKPOINT;
SQL

# The server's CPU so far, in clock ticks: its processes' and, in the
# postmaster's cutime and cstime, those of the backends it reaped.
dir=$(psql -qXAt "$url" -c "SHOW data_directory" 2>/dev/null || true)
server_ticks() {
	local pm
	pm=$(head -1 "$dir/postmaster.pid" 2>/dev/null) || return 0
	{
		awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat"
		for c in $(cat "/proc/$pm/task/$pm/children" 2>/dev/null); do
			awk '{ print $14 + $15 }' "/proc/$c/stat" 2>/dev/null || true
		done
	} | awk '{ t += $1 } END { print t }'
}
statements=$(psql -qXAt "$url" -c "SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'" 2>/dev/null || echo 0)
if [[ $statements == 0 ]] && psql -qXAt "$url" -c "SHOW shared_preload_libraries" | grep -q pg_stat_statements; then
	psql -qX "$url" -c "CREATE EXTENSION pg_stat_statements" >/dev/null && statements=1
fi
[[ $statements == 1 ]] && psql -qXAt "$url" -c "SELECT pg_stat_statements_reset()" >/dev/null

before=$(psql -qXAt "$url" -c "SELECT pg_current_wal_insert_lsn()")
ticks_before=$(server_ticks)
TIMEFORMAT='%U %S'
client=$( { time DATABASE_URL="$url" "$bin/queue-process" --transport=log --send-interval=0 --output=json >/dev/null 2>&1; } 2>&1 || true)
ticks_after=$(server_ticks)
after=$(psql -qXAt "$url" -c "SELECT pg_current_wal_insert_lsn()")
sleep 1 # the statistics collector's last report

psql -qX "$url" -v before="$before" -v after="$after" <<'SQL'
\pset footer off
SELECT count(*) AS sent,
       round(pg_wal_lsn_diff(:'after', :'before') / count(*)) AS wal_bytes_per_message
  FROM engagement_message_queue WHERE status = 'sent' \gset
\echo :sent messages sent, :wal_bytes_per_message bytes of WAL each
SELECT relname AS "table",
       round(n_tup_ins::numeric / :sent, 2) AS inserted,
       round(n_tup_upd::numeric / :sent, 2) AS updated,
       round(n_tup_hot_upd::numeric / :sent, 2) AS "of them HOT",
       round(n_tup_del::numeric / :sent, 2) AS deleted
  FROM pg_stat_user_tables
 WHERE n_tup_ins + n_tup_upd + n_tup_del >= :sent / 100
 ORDER BY n_tup_ins + n_tup_upd + n_tup_del DESC;
SQL

sent=$(psql -qXAt "$url" -c "SELECT count(*) FROM engagement_message_queue WHERE status = 'sent'")
read -r cu cs <<<"${client##*$'\n'}"
awk -v u="$cu" -v s="$cs" -v n="$sent" 'BEGIN { printf "queue-process CPU per message: %.1f µs (user %.1f, system %.1f)\n", (u + s) * 1e6 / n, u * 1e6 / n, s * 1e6 / n }'
if [[ -n $ticks_before ]]; then
	hz=$(getconf CLK_TCK)
	awk -v a="$ticks_before" -v b="$ticks_after" -v hz="$hz" -v n="$sent" \
		'BEGIN { printf "PostgreSQL CPU per message (the whole server, /proc): %.1f µs\n", (b - a) / hz * 1e6 / n }'
else
	echo "(no PostgreSQL CPU: the server's postmaster.pid is not readable here)"
fi
if [[ $statements == 1 ]]; then
	echo "Statements' execution time per message (pg_stat_statements, over 1 µs each):"
	psql -qXAt -F ' ' "$url" -v n="$sent" <<'SQL'
SELECT format('  %8s µs %8s calls  %s', round((total_exec_time * 1000 / :n)::numeric, 1), calls,
              left(regexp_replace(query, '\s+', ' ', 'g'), 70))
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND total_exec_time * 1000 / :n >= 1
 ORDER BY total_exec_time DESC;
SQL
fi
waldump=$(command -v pg_waldump || ls /usr/lib/postgresql/*/bin/pg_waldump 2>/dev/null | tail -1 || true)
if [[ -n $waldump && -r $dir/pg_wal ]]; then
	echo "WAL records per message, by kind (pg_waldump --stats=record):"
	"$waldump" --stats=record -p "$dir/pg_wal" -s "$before" -e "$after" 2>/dev/null |
		awk -v n="$sent" '$2 ~ /^[0-9]+$/ && $2 / n >= 0.05 { printf "  %-24s %6.2f\n", $1, $2 / n }'
else
	echo "(no WAL records by kind: pg_waldump or the server's pg_wal is not readable here)"
fi
