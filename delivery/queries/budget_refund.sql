-- Give back the slots of messages handed back unsent (@ids: a shutdown, an
-- outage, a claim recovered with no send in flight). Slots spent with ample
-- room (claim.sql's rows of engagement_send_budget_claims): @claims lose
-- @counts of their recipients (the live holder counts a recipient when
-- every message of the claim to them came back), and, after a recovery
-- (@recovered: its holder is gone, and only the ids are known), every claim
-- listing one of @ids loses the recipients whose messages in it are all
-- among @ids. Either way @ids leave the claims' lists, so a message handed
-- back, claimed again and recovered again never gives a slot back twice.
-- Slots spent near the limit: a recipient the claim of one of @ids brought
-- into the window leaves it, and one it found there gets its earlier stamp
-- back (a stamp a later claim made is left alone). Slots already out of
-- the window (pruned) are not counted twice. Runs after budget_lock.sql,
-- in its transaction.
WITH given AS (
    SELECT r.id, r.n
      FROM unnest(@claims::bigint[], @counts::int[]) AS r(id, n)
    UNION ALL
    SELECT c.id, (SELECT count(*)::int
                    FROM (SELECT m.recipient
                            FROM unnest(c.message_ids, c.message_recipients) AS m(id, recipient)
                           GROUP BY m.recipient
                          HAVING bool_and(m.id = ANY(@ids::uuid[]))) g)
      FROM engagement_send_budget_claims c
     WHERE @recovered::boolean AND c.transport = @transport AND c.message_ids && @ids::uuid[]
), claims AS (
    UPDATE engagement_send_budget_claims c
       SET recipients = greatest(c.recipients - coalesce((SELECT sum(g.n) FROM given g WHERE g.id = c.id), 0), 0),
           message_ids = (SELECT array_agg(m.id ORDER BY m.o)
                            FROM unnest(c.message_ids) WITH ORDINALITY AS m(id, o)
                           WHERE m.id <> ALL(@ids::uuid[])),
           message_recipients = (SELECT array_agg(m.recipient ORDER BY m.o)
                                   FROM unnest(c.message_ids, c.message_recipients) WITH ORDINALITY AS m(id, recipient, o)
                                  WHERE m.id <> ALL(@ids::uuid[]))
     WHERE c.transport = @transport
       AND (c.id IN (SELECT g.id FROM given g) OR c.message_ids && @ids::uuid[])
    RETURNING coalesce((SELECT sum(g.n) FROM given g WHERE g.id = c.id), 0) AS given
), refunded AS (
    DELETE FROM engagement_send_budget_recipients
     WHERE transport = @transport
       AND message_id = ANY(@ids::uuid[])
       AND previous_spent_at IS NULL
    RETURNING 1
), restored AS (
    UPDATE engagement_send_budget_recipients
       SET spent_at = previous_spent_at,
           previous_spent_at = NULL,
           message_id = NULL
     WHERE transport = @transport
       AND message_id = ANY(@ids::uuid[])
       AND previous_spent_at IS NOT NULL
)
UPDATE engagement_send_budgets
   SET used = greatest(used - (SELECT coalesce(sum(given), 0) FROM claims) - (SELECT count(*) FROM refunded), 0)
 WHERE transport = @transport;
