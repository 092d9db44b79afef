// fire: the bot's moves of the engagement state machine, one call each,
// over the SQL function engagement_fire (migration 30; the Go counterpart
// is activity.Fire).
//
//   const state = await fire(pool, userId, 'goodbye_answer_remind_later', { requestKey: msg.key.id });
//
// The bot triggers and where they go:
//
//   user_message                 any state    -> active   (records the activity)
//   goodbye_answer_help          goodbye_sent -> help_flow
//   goodbye_answer_remind_later  goodbye_sent -> remind_later (remind_at = at + 14 days)
//   goodbye_answer_dormant       goodbye_sent -> dormant
//
// Each move is checked, logged in engagement_state_transitions and applied
// in one statement; a refused one changes nothing and throws one of the
// EngagementError classes below. Any other error (the database, the
// connection, a user id that is not a UUID) is thrown as pg threw it.
'use strict';

// The SQLSTATEs engagement_fire (EN001-EN006), engagement_receipt (EN005,
// EN007; receipt.js) and engagement_opt_out / engagement_opt_in (EN003,
// EN005, EN008; consent.js) raise.
const SQLSTATE = Object.freeze({
  UNKNOWN_TRIGGER: 'EN001', // not a trigger of the state machine
  NOT_A_BOT_TRIGGER: 'EN002', // a trigger of the scheduler's jobs, not the bot's
  UNKNOWN_USER: 'EN003', // no user_engagement_states row
  INVALID_MOVE: 'EN004', // not a move from the user's current state (DETAIL: that state)
  INSTANT_OUT_OF_RANGE: 'EN005', // options.at infinite, before 2000, or over 5 minutes past the database clock
  REQUEST_KEY_OF_ANOTHER_USER: 'EN006', // options.requestKey was used for another user's move
  UNKNOWN_RECEIPT_STATUS: 'EN007', // receipt(): status is not sent, delivered, read or failed
  NO_SOURCE: 'EN008', // optOut(), optIn(): options.source is empty or over 200 characters
});

// The triggers the bot fires, and the states, as the state machine's
// table (statemachine/) names them.
const BOT_TRIGGERS = Object.freeze(['user_message', 'goodbye_answer_help', 'goodbye_answer_remind_later', 'goodbye_answer_dormant']);
const STATES = Object.freeze(['active', 'goodbye_sent', 'help_flow', 'remind_later', 'dormant']);

// EngagementError is the base of every refusal of engagement_fire and
// engagement_receipt (receipt.js): nothing was changed. sqlstate is the
// SQLSTATE it came with, cause the error pg threw; userId and trigger are
// fire's, providerMessageId and status receipt's (set only by receipt),
// source optOut's and optIn's (set only by them, with userId).
class EngagementError extends Error {
  constructor(message, { sqlstate, userId, trigger, cause, providerMessageId, status, source } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.sqlstate = sqlstate;
    this.userId = userId;
    this.trigger = trigger;
    if (providerMessageId !== undefined) {
      this.providerMessageId = providerMessageId;
    }
    if (status !== undefined) {
      this.status = status;
    }
    if (source !== undefined) {
      this.source = source;
    }
  }
}

// UnknownTriggerError (EN001): trigger is no trigger of the state machine
// (a typo, a newer bot than the database).
class UnknownTriggerError extends EngagementError {}

// NotABotTriggerError (EN002): trigger is one the scheduler's jobs fire
// (inactivity_14d, goodbye_timeout, goodbye_undelivered, reminder_due).
class NotABotTriggerError extends EngagementError {}

// UnknownUserError (EN003): the user has no engagement state (no
// user_engagement_states row); for optOut and optIn (consent.js), no
// user_profiles row, where the consent flag lives.
class UnknownUserError extends EngagementError {}

// InvalidMoveError (EN004): trigger is no move from the user's current
// state, fromState (e.g. goodbye_answer_help from active: the user answered
// a goodbye that is over).
class InvalidMoveError extends EngagementError {
  constructor(message, options = {}) {
    super(message, options);
    this.fromState = options.fromState;
  }
}

// InstantOutOfRangeError (EN005): options.at is infinite, before 2000, or
// more than 5 minutes ahead of the database clock: an instant the bot
// cannot mean (a Baileys messageTimestamp is Unix seconds: new Date(ts *
// 1000); ts * 1000000 is the year 58874). Stored, it would keep the user
// from every goodbye. receipt() throws it too, for a receipt's at.
class InstantOutOfRangeError extends EngagementError {}

// RequestKeyOfAnotherUserError (EN006): options.requestKey was used for
// another user's move; a key is one user's.
class RequestKeyOfAnotherUserError extends EngagementError {}

const classes = {
  [SQLSTATE.UNKNOWN_TRIGGER]: UnknownTriggerError,
  [SQLSTATE.NOT_A_BOT_TRIGGER]: NotABotTriggerError,
  [SQLSTATE.UNKNOWN_USER]: UnknownUserError,
  [SQLSTATE.INVALID_MOVE]: InvalidMoveError,
  [SQLSTATE.INSTANT_OUT_OF_RANGE]: InstantOutOfRangeError,
  [SQLSTATE.REQUEST_KEY_OF_ANOTHER_USER]: RequestKeyOfAnotherUserError,
};

// engagementError is the EngagementError for err, an error pg threw for
// engagement_fire, or null when err is not one of its refusals.
function engagementError(err, userId, trigger) {
  const Class = err && classes[err.code];
  if (!Class) {
    return null;
  }
  const options = { sqlstate: err.code, userId, trigger, cause: err };
  if (Class === InvalidMoveError) {
    options.fromState = err.detail; // the user's state
  }
  return new Class(err.message, options);
}

const FIRE_SQL = 'SELECT engagement_fire($1::uuid, $2::text, $3::timestamptz, $4::text) AS state';

// fire applies the bot's trigger to the user and returns the user's state
// afterwards. client is anything with pg's query: a pg.Pool, a pg.Client, a
// pool's client inside your own transaction. options.at (a Date or an
// ISO 8601 string) is the move's instant, the transaction's by default;
// options.requestKey (e.g. the WhatsApp message id) makes the call
// idempotent: a later call with the same key changes nothing and returns
// the state the first one left.
async function fire(client, userId, trigger, { at, requestKey } = {}) {
  if (!client || typeof client.query !== 'function') {
    throw new TypeError('fire: client must have a query method (a pg.Pool or a pg.Client)');
  }
  if (at instanceof Date && Number.isNaN(at.getTime())) {
    throw new TypeError('fire: options.at is an invalid Date');
  }
  let result;
  try {
    result = await client.query(FIRE_SQL, [userId, trigger, at == null ? null : at, requestKey ? requestKey : null]);
  } catch (err) {
    throw engagementError(err, userId, trigger) || err;
  }
  return result.rows[0].state;
}

// createFire binds fire to client: createFire(pool)(userId, trigger, options).
function createFire(client) {
  if (!client || typeof client.query !== 'function') {
    throw new TypeError('createFire: client must have a query method (a pg.Pool or a pg.Client)');
  }
  return (userId, trigger, options) => fire(client, userId, trigger, options);
}

module.exports = {
  fire,
  createFire,
  engagementError,
  EngagementError,
  UnknownTriggerError,
  NotABotTriggerError,
  UnknownUserError,
  InvalidMoveError,
  InstantOutOfRangeError,
  RequestKeyOfAnotherUserError,
  SQLSTATE,
  BOT_TRIGGERS,
  STATES,
};
