-- Make sure @transport has a send budget row, for budget_lock.sql to lock
-- (budget_open.sql sets it).
INSERT INTO engagement_send_budgets (transport, daily_limit)
VALUES (@transport, @daily_limit::int)
    ON CONFLICT (transport) DO NOTHING;
