-- What a queued message's idempotency key stands for, in columns of its own,
-- so that cleanup and verify never read a key's text:
--
--   period_start  the start of the period the key covers, in UTC: the day
--                 of a goodbye ({userId}:goodbye_sent:{YYYY-MM-DD}), the
--                 Monday of a weekly review's ISO week
--                 ({userId}:weekly_review:{YYYY-Www}). verify's
--                 one_goodbye_per_day and one_review_per_week group by it.
--   replay_until  the last instant a job run could produce the key again
--                 (the end of that day or ISO week; a reminder's remind_at):
--                 engagementctl cleanup keeps the message until then.
--
-- The jobs set both when they queue a message; sender.Enqueue (and
-- engagementctl enqueue) when the caller gives them. Both are nullable, so
-- the bot's own inserts keep working: a message without them ages from
-- created_at (cleanup) and falls in the period of its scheduled_for (verify).
-- Added without defaults: existing rows are not rewritten by the ALTER.
ALTER TABLE engagement_message_queue ADD COLUMN period_start timestamptz;
ALTER TABLE engagement_message_queue ADD COLUMN replay_until timestamptz;

-- Backfill the rows queued before this migration from their keys. THIS IS
-- THE ONE PLACE A KEY IS PARSED: from here on the columns are set when a
-- message is queued, and nothing reads a key's text.
--
-- It must not fail on any key (a failed migration blocks every binary), so
-- nothing is cast: the day is built by interval arithmetic from its digits
-- and kept only when it prints back as the key's text (2026-02-30 comes out
-- as 2026-03-02 and is dropped); the ISO week likewise round-trips through
-- to_date and to_char (a week 54 rolls over and is dropped). A key of
-- another shape, or one that does not round-trip, keeps NULL columns, which
-- is how cleanup and verify treated it before: from its queue time and
-- its scheduled_for.
WITH keyed AS (
    SELECT q.id, q.idempotency_key AS k
      FROM engagement_message_queue q
     WHERE q.idempotency_key ~ ':(goodbye_sent:\d{4}-\d{2}-\d{2}|weekly_review:\d{4}-W\d{2}|reminder:\d{1,15})$'
), parsed AS (
    SELECT id, k,
           CASE WHEN k ~ ':goodbye_sent:\d{4}-\d{2}-\d{2}$'
                THEN timestamp '2000-01-01' + make_interval(
                         years  => substr(right(k, 10), 1, 4)::int - 2000,
                         months => substr(right(k, 10), 6, 2)::int - 1,
                         days   => substr(right(k, 10), 9, 2)::int - 1) END AS day,
           CASE WHEN k ~ ':weekly_review:\d{4}-W\d{2}$'
                THEN to_date(replace(right(k, 8), '-W', '-'), 'IYYY-IW')::timestamp END AS week,
           CASE WHEN k ~ ':reminder:\d{1,15}$'
                THEN to_timestamp(substring(k FROM ':reminder:(\d+)$')::bigint / 1000.0) END AS remind_at
      FROM keyed
), periods AS (
    SELECT id,
           CASE WHEN to_char(day, 'YYYY-MM-DD') = right(k, 10) THEN day AT TIME ZONE 'UTC'
                WHEN to_char(week, 'IYYY-"W"IW') = right(k, 8) THEN week AT TIME ZONE 'UTC' END AS period_start,
           CASE WHEN to_char(day, 'YYYY-MM-DD') = right(k, 10) THEN (day + interval '1 day') AT TIME ZONE 'UTC'
                WHEN to_char(week, 'IYYY-"W"IW') = right(k, 8) THEN (week + interval '7 days') AT TIME ZONE 'UTC'
                ELSE remind_at END AS replay_until
      FROM parsed
)
UPDATE engagement_message_queue q
   SET period_start = p.period_start, replay_until = p.replay_until
  FROM periods p
 WHERE q.id = p.id AND p.replay_until IS NOT NULL;
