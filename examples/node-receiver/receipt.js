// receipt: what WhatsApp says of a message the scheduler sent (sent,
// delivered, read, or a failure after it accepted it), one call each over
// the SQL function engagement_receipt (migration 49; the Go counterpart is
// activity.Receipt), and where a bot finds those receipts:
//
//   - Baileys' messages.update events: receiptsFromBaileysUpdate;
//   - Meta's Cloud API webhook, for a bot that owns the app's webhook URL:
//     receiptsFromMetaWebhook, after verifyMetaSignature.
//
//   sock.ev.on('messages.update', async (updates) => {
//     for (const r of receiptsFromBaileysUpdate(updates)) {
//       await receipt(pool, r.providerMessageId, r.status, r); // r: { at, errorCode }
//     }
//   });
//
// The message is found by its provider id: the id the bot answered the
// scheduler's webhook with (message_id, Baileys' key.id; receiver.js) or
// the Cloud API's wamid. Receipts come again and out of order, and a
// message never moves back: read implies delivered; a repeat or an older
// status changes nothing; a failure reported after acceptance (and before
// any delivery) makes the message failed. An id that is not one of the
// scheduler's messages (the bot's own conversation) returns null and
// changes nothing. Refusals throw the EngagementError classes of fire.js:
//
//   EN007  UnknownReceiptStatusError  status is not sent, delivered, read or failed
//   EN005  InstantOutOfRangeError     options.at is infinite, before 2000, or more
//                                     than 5 minutes ahead of the database clock
//
// Any other error (the database, the connection) is thrown as pg threw it.
'use strict';

const { EngagementError, InstantOutOfRangeError, SQLSTATE } = require('./fire');
const { verifySignature } = require('./receiver');

// The statuses a receipt may carry, as WhatsApp reports them (Meta's
// statuses[].status).
const RECEIPT_STATUSES = Object.freeze(['sent', 'delivered', 'read', 'failed']);

// UnknownReceiptStatusError (EN007): status is none of RECEIPT_STATUSES (a
// typo, or a status WhatsApp added that the scheduler does not know).
// providerMessageId and status are the call's.
class UnknownReceiptStatusError extends EngagementError {}

const classes = {
  [SQLSTATE.UNKNOWN_RECEIPT_STATUS]: UnknownReceiptStatusError,
  [SQLSTATE.INSTANT_OUT_OF_RANGE]: InstantOutOfRangeError,
};

// receiptError is the EngagementError for err, an error pg threw for
// engagement_receipt, or null when err is not one of its refusals.
function receiptError(err, providerMessageId, status) {
  const Class = err && classes[err.code];
  if (!Class) {
    return null;
  }
  return new Class(err.message, { sqlstate: err.code, providerMessageId, status, cause: err });
}

const RECEIPT_SQL = 'SELECT engagement_receipt($1::text, $2::text, $3::timestamptz, $4::text) AS known';

// receipt applies one receipt to the message whose provider id is
// providerMessageId and returns what is known of it now: 'accepted' (sent,
// no delivery reported yet), 'delivered', 'read' or 'failed'; the queue's
// status for a message not sent ('pending', 'processing', 'cancelled'); or
// null for an id that is none of the scheduler's messages. client is
// anything with pg's query (a pg.Pool, a pg.Client, a pool's client inside
// your own transaction). options.at (a Date or an ISO 8601 string) is when
// WhatsApp says it happened, the transaction's time by default;
// options.errorCode (a string or a number: Meta's errors[0].code, e.g.
// 131026) is kept in the failed message's error_message.
async function receipt(client, providerMessageId, status, { at, errorCode } = {}) {
  if (!client || typeof client.query !== 'function') {
    throw new TypeError('receipt: client must have a query method (a pg.Pool or a pg.Client)');
  }
  if (typeof providerMessageId !== 'string') {
    throw new TypeError('receipt: providerMessageId must be a string (Baileys\' key.id, the Cloud API\'s wamid)');
  }
  if (at instanceof Date && Number.isNaN(at.getTime())) {
    throw new TypeError('receipt: options.at is an invalid Date');
  }
  const code = errorCode == null || errorCode === '' ? null : String(errorCode);
  let result;
  try {
    result = await client.query(RECEIPT_SQL, [providerMessageId, status, at == null ? null : at, code]);
  } catch (err) {
    throw receiptError(err, providerMessageId, status) || err;
  }
  return result.rows[0].known;
}

// createReceipt binds receipt to client: createReceipt(pool)(id, status, options).
function createReceipt(client) {
  if (!client || typeof client.query !== 'function') {
    throw new TypeError('createReceipt: client must have a query method (a pg.Pool or a pg.Client)');
  }
  return (providerMessageId, status, options) => receipt(client, providerMessageId, status, options);
}

// ---------------------------------------------------------------- Baileys

// BAILEYS_STATUS is Baileys' WAMessageStatus, proto.WebMessageInfo.Status
// of its WAProto (@whiskeysockets/baileys 7.0.0-rc14: WAProto/WAProto.proto,
// message WebMessageInfo, enum Status; WAProto/index.d.ts; lib/Types/
// Message.js: WAMessageStatus = proto.WebMessageInfo.Status). The tests
// compare it with the real package's, so a renumbering fails them.
const BAILEYS_STATUS = Object.freeze({
  ERROR: 0, // the server refused the message (an error in its ack)
  PENDING: 1, // not yet acknowledged by the server: nothing to report
  SERVER_ACK: 2, // WhatsApp's servers have it: sent
  DELIVERY_ACK: 3, // on the user's phone: delivered
  READ: 4, // read
  PLAYED: 5, // a voice or video message played, which implies read
});

// What each WAMessageStatus is as a receipt; PENDING is none.
const BAILEYS_RECEIPT = new Map([
  [BAILEYS_STATUS.ERROR, 'failed'],
  [BAILEYS_STATUS.SERVER_ACK, 'sent'],
  [BAILEYS_STATUS.DELIVERY_ACK, 'delivered'],
  [BAILEYS_STATUS.READ, 'read'],
  [BAILEYS_STATUS.PLAYED, 'read'],
]);

// unixSeconds is a Date for a Unix-seconds value (a number, a string of
// digits, or a protobufjs Long with toNumber), or undefined for anything
// else, 0 included (Baileys writes 0 for a receipt without a time).
function unixSeconds(value) {
  if (value && typeof value === 'object' && typeof value.toNumber === 'function') {
    value = value.toNumber();
  } else if (typeof value === 'string' && /^\d+$/.test(value)) {
    value = Number(value);
  }
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    return undefined;
  }
  return new Date(value * 1000);
}

// receiptsFromBaileysUpdate maps a Baileys 'messages.update' event (an
// array of { key, update }: WAMessageUpdate in lib/Types/Message.d.ts,
// BaileysEventMap['messages.update'] in lib/Types/Events.d.ts) to the
// receipts of the messages the bot sent (key.fromMe): { providerMessageId:
// key.id, status, at?, errorCode? }. When a receipt comes (lib/Socket/
// messages-recv.js), update.status is the new WAMessageStatus and
// update.messageTimestamp the receipt's time in Unix seconds; an ERROR in
// the server's ack carries its code in update.messageStubParameters[0].
// Updates without a status (edits, reactions, polls), PENDING, a status
// this package does not know, and other people's messages give nothing.
// The status may also be the enum's name ('DELIVERY_ACK'), as protobufjs'
// toJSON writes it. A group's receipts come per member in
// 'message-receipt.update', not here.
function receiptsFromBaileysUpdate(updates) {
  const receipts = [];
  for (const u of Array.isArray(updates) ? updates : []) {
    const key = u && u.key;
    const update = u && u.update;
    if (!key || key.fromMe !== true || typeof key.id !== 'string' || key.id === '' || !update || update.status == null) {
      continue;
    }
    const number = typeof update.status === 'string' ? BAILEYS_STATUS[update.status] : update.status;
    const status = BAILEYS_RECEIPT.get(number);
    if (!status) {
      continue;
    }
    const r = { providerMessageId: key.id, status };
    const at = unixSeconds(update.messageTimestamp);
    if (at) {
      r.at = at;
    }
    const stub = update.messageStubParameters;
    if (status === 'failed' && Array.isArray(stub) && stub[0] != null && String(stub[0]) !== '') {
      r.errorCode = String(stub[0]);
    }
    receipts.push(r);
  }
  return receipts;
}

// ---------------------------------------------------------------- Meta

// receiptsFromMetaWebhook reads the receipts of a Cloud API webhook body
// (object 'whatsapp_business_account'; a parsed object, or the raw JSON as
// a string or a Buffer): each entry[].changes[] of field 'messages' and
// its value.statuses[] (https://developers.facebook.com/documentation/
// business-messaging/whatsapp/webhooks/reference/messages/status/):
// id → providerMessageId, status, timestamp (Unix seconds, a string) →
// at, errors[0].code → errorCode (a string). A status other than sent,
// delivered, read or failed, an entry without an id, and one whose
// timestamp is not Unix seconds are skipped (as the console's
// /webhooks/whatsapp does); every other field (recipient_id, pricing,
// conversation, messages[], …) is never read. Check the signature on the
// raw body first (verifyMetaSignature).
function receiptsFromMetaWebhook(body) {
  if (typeof body === 'string' || body instanceof Uint8Array) {
    body = JSON.parse(Buffer.from(body).toString('utf8'));
  }
  const receipts = [];
  if (!body || body.object !== 'whatsapp_business_account' || !Array.isArray(body.entry)) {
    return receipts;
  }
  for (const entry of body.entry) {
    for (const change of (entry && Array.isArray(entry.changes)) ? entry.changes : []) {
      const statuses = change && change.field === 'messages' && change.value && change.value.statuses;
      for (const s of Array.isArray(statuses) ? statuses : []) {
        if (!s || typeof s.id !== 'string' || s.id === '' || !RECEIPT_STATUSES.includes(s.status)) {
          continue;
        }
        const r = { providerMessageId: s.id, status: s.status };
        if (s.timestamp != null) {
          const at = /^\d+$/.test(String(s.timestamp)) ? unixSeconds(Number(s.timestamp)) : undefined;
          if (!at) {
            continue;
          }
          r.at = at;
        }
        const code = Array.isArray(s.errors) && s.errors[0] ? s.errors[0].code : undefined;
        if (code != null && String(code) !== '') {
          r.errorCode = String(code);
        }
        receipts.push(r);
      }
    }
  }
  return receipts;
}

// verifyMetaSignature says whether header (X-Hub-Signature-256,
// "sha256=<hex>") is the HMAC-SHA256 of the raw body bytes under the app's
// secret, compared in constant time (crypto.timingSafeEqual): the check of
// receiver.js's verifySignature, under Meta's header. Anything missing or
// malformed is false. rawBody must be the bytes Meta sent, before any JSON
// parsing.
function verifyMetaSignature(appSecret, rawBody, header) {
  return verifySignature(appSecret, rawBody, header);
}

module.exports = {
  receipt,
  createReceipt,
  receiptError,
  UnknownReceiptStatusError,
  RECEIPT_STATUSES,
  BAILEYS_STATUS,
  receiptsFromBaileysUpdate,
  receiptsFromMetaWebhook,
  verifyMetaSignature,
  unixSeconds,
};
