-- How many profiles there are among @user_ids (NULL or empty: every
-- profile), what the kit's own tests count.
SELECT count(*)::int AS n
  FROM user_profiles
 WHERE coalesce(cardinality(@user_ids::uuid[]), 0) = 0 OR user_id = ANY (@user_ids::uuid[])
