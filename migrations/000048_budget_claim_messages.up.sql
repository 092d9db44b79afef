-- A claim made while the send budget had ample room records which messages
-- it spent its slots on, and each one's recipient (the MD5 of its
-- destination_jid, as engagement_send_budget_recipients keeps it): when its
-- holder dies, recovery gives back the slots of the recipients whose
-- messages all came back unsent (delivery/queries/budget_refund.sql). A
-- refund takes the messages it gave back out of the lists, so no slot is
-- given back twice. Rows from before this migration have none: their slots
-- stay spent until the window turns, as before.
ALTER TABLE engagement_send_budget_claims
    ADD COLUMN IF NOT EXISTS message_ids uuid[],
    ADD COLUMN IF NOT EXISTS message_recipients uuid[];
