-- The goodbye's holdout (issue 45; ../shared/CONTRACT.md, round six): a
-- control group of users who take the goodbye's move without the message,
-- so the funnel can compare the users who got it with those who did not.
--
-- engagement_holdout_bucket(salt, user_id) is the user's bucket, 0 to
-- 9999: the first 32 bits of md5(salt || ':' || user_id), as an unsigned
-- number, modulo 10000. The daily job holds a user out when the bucket is
-- below the holdout percent times 100 (--holdout-percent 10: buckets 0 to
-- 999). It depends on the salt and the user id alone, so a re-run, another
-- shard or another database with the same users holds out the same ones;
-- raising the percent keeps everyone held out so far; and a new salt
-- (--holdout-salt) draws a new group on purpose. md5 is used for its
-- spread and because it is the same in every PostgreSQL version and in Go
-- (crypto/md5), not for secrecy. The function is plain SQL and IMMUTABLE,
-- so the planner inlines it.
CREATE FUNCTION engagement_holdout_bucket(salt text, user_id uuid)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (('x' || substr(md5(salt || ':' || user_id::text), 1, 8))::bit(32)::bigint % 10000)::integer
$$;

-- The held-out fact is recorded where the funnel reads it: on the goodbye's
-- log row (trigger inactivity_14d), true for a user the run held out, so
-- the funnel never re-derives it from a salt that may have changed since.
-- Every other row is false. A constant default adds the column without
-- rewriting the log.
ALTER TABLE engagement_state_transitions
    ADD COLUMN holdout boolean NOT NULL DEFAULT false;

DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_holdout_bucket(text, uuid) FROM PUBLIC%s',
                   coalesce(', ' || api, ''));
END
$$;
