-- Delivery v3: a claim belongs to a live processor, not to a deadline on
-- each message.
--
-- Every queue-process (every Processor) keeps one row here while it runs
-- and renews it every third of its --claim-timeout. Renewing one row
-- instead of every claimed message is what keeps renewals from ever
-- waiting on (or deadlocking with) the statements that record outcomes:
-- they touch different rows of different tables.
--
-- A holder is dead when its row has not been renewed in time: recovery
-- then marks it buried (in one UPDATE that takes the row's lock, so a
-- renewal racing it either lands first, and the holder lives, or finds
-- the row buried, and the holder knows its claims are gone). A clean exit
-- hands every claim back and deletes the row.
CREATE TABLE engagement_queue_holders (
    holder      text PRIMARY KEY,
    alive_until timestamptz NOT NULL,
    buried      boolean NOT NULL DEFAULT false,
    started_at  timestamptz NOT NULL DEFAULT now()
);

-- Whether a message in flight (claimed_by, claimed_until) is abandoned at
-- instant at: its holder's row says it is dead (buried, or not renewed by
-- then); a claim whose holder has no row (taken before this migration, by
-- an older queue-process) keeps its own deadline.
CREATE FUNCTION engagement_claim_abandoned(claimed_by text, claimed_until timestamptz, at timestamptz)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(
        (SELECT h.buried OR h.alive_until < at
           FROM engagement_queue_holders h
          WHERE h.holder = claimed_by),
        claimed_until IS NULL OR claimed_until < at)
$$;
