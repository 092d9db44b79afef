-- How many users the database holds (user_profiles rows): engagementctl
-- seed and smoke fill only empty databases. On a database without the
-- schema it fails with 42P01 (undefined_table).
SELECT count(*) AS users FROM user_profiles
