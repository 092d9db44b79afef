-- What a delivered message costs the database, cut (issue 59,
-- docs/BENCHMARKS.md "Cutting what a message costs").
--
-- Room on the queue's pages. Every message is updated twice after it is
-- queued (the claim: pending → processing; the record: → sent), and
-- neither update can be HOT (status is in the predicates of the partial
-- indexes). At the default fillfactor (100) a page of pending rows is
-- full, so each new version went to another page: PostgreSQL then first
-- marks the old version locked in its own WAL record (heap_update's
-- "lock before releasing the buffer"), dirties a second page and its
-- visibility-map bit, and looks for room in the free-space map. Counted
-- (scripts/wal-per-message.sh, 20,000 messages): 2 of the 4 row locks a
-- message wrote were those. A page filled to half leaves room for the
-- claim's versions of its own rows, and pruning frees the pending ones
-- for the record's once they are dead: at 50 % 0.25 updates a message
-- still left their page, at 70 % about one, at 100 % both. The price is
-- room: a queued row takes about twice its 340 bytes of heap until
-- retention (engagementctl cleanup) deletes it, and its receipts'
-- updates (delivered_at, read_at: in no index) find room to be HOT. It
-- applies to rows queued from now on; the rows already there keep their
-- pages. ALTER TABLE … SET (fillfactor) takes a SHARE UPDATE EXCLUSIVE
-- lock: the bot's and the jobs' reads and writes go on meanwhile.
ALTER TABLE engagement_message_queue SET (fillfactor = 50);

-- The receipt gate (migration 65) is empty at rest: each row is inserted
-- and deleted again in the same transaction, only for the tuple lock that
-- makes a receipt and its send meet. Unlogged, the pass writes no WAL (4
-- records a message whose send returned a provider id); a crash empties
-- an unlogged table, which is what the gate is at rest anyway, and the
-- waits are the same tuple locks as before.
ALTER TABLE engagement_receipt_gate SET UNLOGGED;

-- The pass in PL/pgSQL, its two statements planned once per session
-- (a LANGUAGE sql function that cannot be inlined plans its body at
-- every call: twice a recorded message).
CREATE OR REPLACE FUNCTION engagement_receipt_gate_pass(p_provider_message_id text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO engagement_receipt_gate (provider_message_id) VALUES (p_provider_message_id)
        ON CONFLICT (provider_message_id) DO NOTHING;
    DELETE FROM engagement_receipt_gate WHERE provider_message_id = p_provider_message_id;
END
$$;

-- The recording's side of the gate, in the trigger itself: one function
-- call (and its search_path switch) fewer per recorded message.
CREATE OR REPLACE FUNCTION engagement_receipt_inbox_apply()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    r engagement_receipt_inbox%ROWTYPE;
BEGIN
    -- engagement_receipt_gate_pass, spelled out.
    INSERT INTO engagement_receipt_gate (provider_message_id) VALUES (NEW.provider_message_id)
        ON CONFLICT (provider_message_id) DO NOTHING;
    DELETE FROM engagement_receipt_gate WHERE provider_message_id = NEW.provider_message_id;
    FOR r IN SELECT * FROM engagement_receipt_inbox i
              WHERE i.provider_message_id = NEW.provider_message_id
              ORDER BY i.id
                FOR UPDATE
    LOOP
        PERFORM engagement_receipt(r.provider_message_id, r.status, r.at, r.error_code);
        DELETE FROM engagement_receipt_inbox WHERE id = r.id;
    END LOOP;
    RETURN NULL;
END
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_receipt_inbox_apply() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION engagement_receipt_gate_pass(text) SET search_path = %I, pg_temp', current_schema());
END
$$;
