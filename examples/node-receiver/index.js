// @engagement-scheduler/bot: what a Node.js WhatsApp bot (Baileys) needs
// from the engagement scheduler, with pg as its one dependency:
//
//   - the webhook receiver of docs/receiver.md (receiver.js): the
//     signature check and the de-duplication by Idempotency-Key in
//     PostgreSQL, as one HTTP handler (createReceiver) or step by step;
//   - fire (fire.js): the bot's moves of the state machine, one checked,
//     logged, idempotent call each over engagement_fire, with typed errors;
//   - receipt (receipt.js): WhatsApp's receipts of the scheduler's
//     messages (sent, delivered, read, failed) over engagement_receipt,
//     from Baileys' messages.update (receiptsFromBaileysUpdate) or Meta's
//     Cloud API webhook (receiptsFromMetaWebhook, verifyMetaSignature);
//   - consent (consent.js): optOut and optIn over engagement_opt_out and
//     engagement_opt_in, and the chat keywords by which a user says stop
//     or resume (isOptOutKeyword, isOptInKeyword; docs/consent.md);
//   - account (account.js): Baileys' refusals of the whole account
//     (rate-overlimit, logged out, banned, the reach-out timelock) as the
//     webhook's account answers (accountErrorFrom, createAccountState;
//     docs/receiver.md).
//
// Types: index.d.ts.
'use strict';

module.exports = {
  ...require('./receiver'),
  ...require('./fire'),
  ...require('./receipt'),
  ...require('./consent'),
  ...require('./account'),
};
