-- Wishes that reach claimed messages at once (issue 56, findings 2 and 5).
--
-- A message claimed by queue-process is checked against its user again
-- just before its send; unpaced, a batch's check counted for a second
-- (delivery.RecheckAge), so an opt-out or an erase that committed after it
-- let that user's next messages go for up to a second more (measured: the
-- last at +917 ms). Reading the whole rest of every batch again more often
-- costs the rate the batching buys (docs/BENCHMARKS.md), so a wish leaves
-- a small mark instead, which queue-process reads every 50 ms, and only a
-- batch holding a marked user's message is checked again.
--
-- engagement_wishes has a row per opt-out (every door: engagement_opt_out,
-- the console, 131050, Meta's user_preferences: all record a consent event,
-- and the trigger below adds the row in the same transaction) and per erase
-- (engagementctl erase and the console add theirs). xid is the writing
-- transaction's id: queue-process reads the rows of the transactions
-- that were still running, or had not started, at its previous read
-- (xid >= that read's snapshot xmin), so a wish is read once it commits,
-- whatever order the transactions commit in (a sequence's order is the
-- order the rows were written, not committed). No user data: the user id
-- (a UUID, kept by erase as everywhere) and when. queue-process deletes
-- the rows older than a day at the start of each run.
CREATE TABLE engagement_wishes (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid        xid8        NOT NULL DEFAULT pg_current_xact_id(),
    user_id    uuid        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX engagement_wishes_xid_idx ON engagement_wishes (xid);
CREATE INDEX engagement_wishes_created_idx ON engagement_wishes (created_at);

-- engagement_note_wish adds the wish of a consent event that opts its user
-- out.
CREATE FUNCTION engagement_note_wish() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
BEGIN
    INSERT INTO engagement_wishes (user_id) VALUES (NEW.user_id);
    RETURN NULL;
END
$$;

CREATE TRIGGER engagement_note_wish
    AFTER INSERT ON engagement_consent_events
    FOR EACH ROW
    WHEN (NEW.opted_out)
    EXECUTE FUNCTION engagement_note_wish();

ALTER TABLE engagement_wishes ENABLE ROW LEVEL SECURITY;
DO $$
DECLARE
    api text := (SELECT string_agg(quote_ident(rolname), ', ')
                   FROM pg_roles WHERE rolname IN ('anon', 'authenticated'));
BEGIN
    EXECUTE format('ALTER FUNCTION engagement_note_wish() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('REVOKE ALL ON FUNCTION engagement_note_wish() FROM PUBLIC%s', coalesce(', ' || api, ''));
    IF api IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON TABLE engagement_wishes FROM %s', api);
        EXECUTE format('REVOKE ALL ON SEQUENCE engagement_wishes_id_seq FROM %s', api);
    END IF;
END
$$;
