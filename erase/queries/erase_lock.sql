-- Lock user @user_id's messages, in id order (the one order every statement
-- on claimed rows takes), before the scrub. A send's settle (settle.sql)
-- locks its message and writes the send ledger's row, with the provider id,
-- in one statement; the scrub, had it waited for that lock itself, would
-- read the ledger as of its own start and miss a row the settle inserted
-- meanwhile (CI at b700051: an erased user's ledger row kept its provider
-- id). Locked first, in a statement of its own, every settle under way has
-- committed before the scrub starts, and any later one finds the message
-- erased (destination_jid '') and writes no provider id.
SELECT q.id
  FROM engagement_message_queue q
 WHERE q.user_id = @user_id::uuid
 ORDER BY q.id
   FOR UPDATE;
