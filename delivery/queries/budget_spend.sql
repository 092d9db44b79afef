-- Spend @recipients slots of @transport's send budget on a claim made while
-- the window had ample room: the claim is recorded as one row of
-- engagement_send_budget_claims, its recipients counted once each within
-- it (a recipient it shares with another claim counts in both: the budget
-- errs on the side of sending less), and used counts them, if they fit
-- under @daily_limit. If not, the statement fails with SQLSTATE EB001
-- (engagement_send_budget_full), all of it undone, and the caller applies
-- the budget recipient by recipient, under its lock (budget_apply.sql).
-- One statement, run on its own: the row of engagement_send_budgets is
-- held only from its update to the commit. Returns used and the claim's
-- row, for a refund.
WITH claim AS (
    INSERT INTO engagement_send_budget_claims (transport, spent_at, recipients)
    VALUES (@transport, now() + @clock_offset::interval, @recipients::int)
    RETURNING id
), counted AS (
    UPDATE engagement_send_budgets b
       SET used = b.used + @recipients::int
     WHERE b.transport = @transport
       AND b.used + @recipients::int <= @daily_limit::int
    RETURNING b.used
)
SELECT coalesce((SELECT used FROM counted), engagement_send_budget_full()), (SELECT id FROM claim);
