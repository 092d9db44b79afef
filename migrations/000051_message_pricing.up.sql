-- What Meta bills (issue 43, "What it costs"): since July 2025 Meta bills
-- per delivered template, at the price of its category (marketing,
-- utility, authentication; service is free) in the recipient's country.
-- Every status webhook says so in its pricing object (billable, category);
-- the console's webhook keeps the latest Meta said, by provider id, next
-- to the receipt it came with (console/queries/whatsapp_pricing.sql).
--
-- billable and pricing_category are nullable, added without a default: no
-- rewrite of the bot's queue. NULL means Meta said nothing (a message sent
-- through the bot's webhook, or no status yet): the spend then falls back
-- on the kind's category (statemachine's Kind.Category) and on delivery.
-- They are the scheduler's: the adoption preflight refuses a bot table that
-- has them already.
ALTER TABLE engagement_message_queue
    ADD COLUMN billable boolean,
    ADD COLUMN pricing_category text;
