-- Lock @transport's send budget until the transaction ends: under a budget,
-- claims (and the refunds of messages handed back) on one transport take
-- their turn, so that no two count the same free slot. The statements
-- after it in the transaction read the budget as this lock left it.
SELECT used
  FROM engagement_send_budgets
 WHERE transport = @transport
   FOR UPDATE;
