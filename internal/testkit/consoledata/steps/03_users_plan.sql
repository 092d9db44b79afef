-- What the staged users decide about the rest (Seed's plan): their logged
-- moves (which must be exactly Sizes.Transitions), the goodbyes and the
-- reminders (since @reminders_since) their moves queue, the user-weeks a
-- review could go to (all, and those the user was engaged in) and the
-- earliest move. Read by name: the staged tables are Seed's own, so make
-- sql cannot type this.
SELECT coalesce(sum(ell), 0) AS moves,
       coalesce(sum(cardinality(array_positions(tr, 1::smallint))), 0) AS goodbyes,
       coalesce(sum((SELECT count(*) FROM generate_subscripts(tr, 1) AS k
                      WHERE tr[k] = 4 AND pg_temp.cd_run(ts[k]) >= @reminders_since::timestamptz)) FILTER (WHERE NOT opt), 0) AS reminders,
       coalesce(sum(bit_count(mask::bit(64))), 0) AS all_weeks,
       coalesce(sum(bit_count((mask & emask)::bit(64))), 0) AS engaged_weeks,
       min(ts[1]) AS earliest
  FROM consoledata.users
