-- The users' transactions (cd_seed: about one for every two users, in the
-- last 60 days). An id starts with its user's first 8 hex digits, so the
-- primary key fills left to right with the user_id order of the insert.
INSERT INTO transactions (id, user_id, created_at)
SELECT (left(u.user_id::text, 8) || substr(md5('consoledata:tx:' || u.i || ':' || x.k), 9))::uuid, u.user_id, x.at
  FROM consoledata.users u
 CROSS JOIN LATERAL (VALUES (1, u.tx1), (2, u.tx2), (3, u.tx3)) AS x (k, at)
 WHERE x.at IS NOT NULL
 ORDER BY u.user_id, x.k
