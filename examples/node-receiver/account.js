// Refusals of the bot's whole WhatsApp account, as the scheduler's webhook
// contract wants them answered (docs/receiver.md, "Account answers"): HTTP
// 409, 429, 401 or 403 with {"account_error": ..., "retry_after_s": n}.
// queue-process then pauses every send through the webhook until the
// pause ends, instead of trying message after message.
//
// What Baileys (@whiskeysockets/baileys 7.0.0-rc14) throws or reports:
//
//   - rate_overlimit: a query the send makes (devices, pre-keys, group
//     metadata) answered with <error code="429" text="rate-overlimit">
//     throws from assertNodeErrorFree (lib/WABinary/generic-utils.js) as
//     new Boom(text, { data: 429 }): data is 429, output.statusCode is
//     Boom's default 500 (WhiskeySockets/Baileys#797, #1261 show the same
//     error thrown out of sendMessage). Baileys gives no time to wait.
//   - logged_out: DisconnectReason.loggedOut (401, lib/Types/index.js), the
//     output.statusCode of the Boom that closes the socket ("Connection
//     Failure" from the server's <failure reason="401">, or "Intentional
//     Logout"; lib/Socket/socket.js), in connection.update's lastDisconnect.
//   - banned: DisconnectReason.forbidden (403); named blockedNumber in
//     WhiskeySockets/Baileys#535, renamed forbidden there because 403 also
//     comes with invalid login keys. Either way the number cannot send.
//   - reachout_timelock: error 463 (NACK_REASONS.SenderReachoutTimelocked,
//     lib/Utils/decode-wa-message.js) arrives in the server's ack after
//     sendMessage returned: messages.update with messageStubParameters
//     ['463', 'Your account has been restricted'] (lib/Socket/
//     messages-recv.js, handleBadAck). The lock itself is connection.update's
//     reachoutTimeLock {isActive, timeEnforcementEnds, enforcementType},
//     from the xwa2_notify_account_reachout_timelock notification or
//     fetchAccountReachoutTimelock() (lib/Socket/socket.js). Retrying does
//     not lift it (WhiskeySockets/Baileys#2441; Baileys' own comment: "No
//     retry — retrying counts as another reach out").
'use strict';

// The contract's status of each account error.
const ACCOUNT_ERROR_STATUS = Object.freeze({
  reachout_timelock: 409,
  rate_overlimit: 429,
  logged_out: 401,
  banned: 403,
});

// retry_after_s when Baileys does not say: our choice, not WhatsApp's.
// A rate limit is short-lived (an hour); an operator has to link the
// number again after a logout (the next try in an hour); a reach-out lock
// without an end and a ban are taken for a day (WhiskeySockets/Baileys
// #1983 reports restrictions of 24 h, then 48 h).
const DEFAULT_RETRY_AFTER_S = Object.freeze({
  reachout_timelock: 24 * 3600,
  rate_overlimit: 3600,
  logged_out: 3600,
  banned: 24 * 3600,
});

const REACHOUT_TIMELOCKED = 463; // NACK_REASONS.SenderReachoutTimelocked
const LOGGED_OUT = 401; // DisconnectReason.loggedOut
const FORBIDDEN = 403; // DisconnectReason.forbidden
const RATE_OVERLIMIT = 429; // the code of <error text="rate-overlimit">

// accountAnswer is the webhook's answer {status, body} for accountError,
// waiting retryAfterS seconds (its default when not given).
function accountAnswer(accountError, retryAfterS) {
  const status = ACCOUNT_ERROR_STATUS[accountError];
  if (!status) {
    throw new TypeError(`accountAnswer: unknown account error ${JSON.stringify(accountError)}`);
  }
  const s = Number.isFinite(retryAfterS) && retryAfterS > 0 ? Math.ceil(retryAfterS) : DEFAULT_RETRY_AFTER_S[accountError];
  return { status, body: { account_error: accountError, retry_after_s: s } };
}

// secondsUntil is the whole seconds from now to until (a Date), at least 1;
// undefined when until is not a time.
function secondsUntil(until, now) {
  const ms = until instanceof Date ? until.getTime() - now.getTime() : NaN;
  return Number.isFinite(ms) ? Math.max(1, Math.ceil(ms / 1000)) : undefined;
}

// accountErrorFrom maps what Baileys threw while sending to the contract's
// answer {status, body}, or null for anything that is not a refusal of the
// whole account (a failure of this one message, answered as before).
// timeEnforcementEnds (a Date), when the bot knows it, sets a reach-out
// lock's retry_after_s.
function accountErrorFrom(err, { now = new Date(), timeEnforcementEnds } = {}) {
  if (!err || typeof err !== 'object') {
    return null;
  }
  const status = err.output && err.output.statusCode;
  const data = err.data;
  const message = typeof err.message === 'string' ? err.message : '';
  if (status === REACHOUT_TIMELOCKED || data === REACHOUT_TIMELOCKED || /reach-?out ?time-?lock|account has been restricted/i.test(message)) {
    const ends = timeEnforcementEnds || (data && typeof data === 'object' && data.timeEnforcementEnds);
    return accountAnswer('reachout_timelock', secondsUntil(ends, now));
  }
  if (status === RATE_OVERLIMIT || data === RATE_OVERLIMIT || message === 'rate-overlimit') {
    return accountAnswer('rate_overlimit');
  }
  // 401 and 403 only as the socket's own status: a query's <error
  // code="403"> (data 403, e.g. a group the bot has left) is about that
  // one chat.
  if (err.isBoom && status === LOGGED_OUT) {
    return accountAnswer('logged_out');
  }
  if (err.isBoom && status === FORBIDDEN) {
    return accountAnswer('banned');
  }
  return null;
}

// createAccountState keeps what Baileys said about the account, so that
// the receiver answers a refusal before it tries to send:
//
//   sock.ev.on('connection.update', account.connectionUpdate);
//   sock.ev.on('messages.update', account.messagesUpdate);
//
// connectionUpdate takes reachoutTimeLock (held until timeEnforcementEnds,
// or until isActive: false) and a close by loggedOut/forbidden (held until
// the connection is open again). messagesUpdate takes an ack with error
// 463 as a reach-out lock whose end is not known yet. A lock without an
// end is held for DEFAULT_RETRY_AFTER_S from when it was heard of: in
// 7.0.0-rc14 a 463 ack does not make Baileys fetch the lock (handleBadAck's
// MessageAccountRestriction branch comes before its isReachoutTimelocked
// one), so its end, or its lifting, may never be told; a bot that wants
// them calls sock.fetchAccountReachoutTimelock(), which emits
// connection.update. refused(answer) holds an answer the receiver gave
// after a send threw, for its retry_after_s. answer({now}) is the answer to
// give now, or null.
const lockDefault = (now) => new Date(now.getTime() + DEFAULT_RETRY_AFTER_S.reachout_timelock * 1000);

function createAccountState() {
  let lock = null; // {until: Date}
  let closed = null; // 'logged_out' | 'banned'
  let refusal = null; // {accountError, until: Date}

  const state = {
    connectionUpdate(update = {}, { now = new Date() } = {}) {
      const tl = update.reachoutTimeLock;
      if (tl) {
        lock = tl.isActive ? { until: tl.timeEnforcementEnds instanceof Date ? tl.timeEnforcementEnds : lockDefault(now) } : null;
      }
      if (update.connection === 'open') {
        closed = null;
      } else if (update.connection === 'close') {
        const err = update.lastDisconnect && update.lastDisconnect.error;
        const status = err && err.output && err.output.statusCode;
        closed = status === LOGGED_OUT ? 'logged_out' : status === FORBIDDEN ? 'banned' : null;
      }
    },
    messagesUpdate(updates = [], { now = new Date() } = {}) {
      for (const u of updates) {
        const params = u && u.update && u.update.messageStubParameters;
        if (u && u.key && u.key.fromMe && Array.isArray(params) && String(params[0]) === String(REACHOUT_TIMELOCKED)
            && !(lock && lock.until > now)) {
          lock = { until: lockDefault(now) };
        }
      }
    },
    refused(answer, { now = new Date() } = {}) {
      if (answer && answer.body) {
        refusal = { accountError: answer.body.account_error, until: new Date(now.getTime() + answer.body.retry_after_s * 1000) };
      }
    },
    answer({ now = new Date() } = {}) {
      if (closed) {
        return accountAnswer(closed);
      }
      if (lock && lock.until > now) {
        return accountAnswer('reachout_timelock', secondsUntil(lock.until, now));
      }
      if (refusal && refusal.until > now) {
        return accountAnswer(refusal.accountError, secondsUntil(refusal.until, now));
      }
      return null;
    },
  };
  return state; // its methods use no this: sock.ev.on takes them as they are
}

module.exports = {
  accountErrorFrom,
  accountAnswer,
  createAccountState,
  ACCOUNT_ERROR_STATUS,
  DEFAULT_RETRY_AFTER_S,
};
