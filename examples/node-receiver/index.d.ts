// Types of @engagement-scheduler/bot (index.js, receiver.js, fire.js, receipt.js, consent.js),
// written by hand: the package is plain JavaScript with no build step.
// The HTTP types come from @types/node, which a TypeScript bot has.

import type { IncomingMessage, ServerResponse } from 'node:http';

/** A user's engagement state, as the state machine's table names it. */
export type EngagementState = 'active' | 'goodbye_sent' | 'help_flow' | 'remind_later' | 'dormant';

/**
 * A move the bot fires:
 * - `user_message`: any state → `active`, recording the activity;
 * - `goodbye_answer_help`: `goodbye_sent` → `help_flow`;
 * - `goodbye_answer_remind_later`: `goodbye_sent` → `remind_later` (remind_at = at + 14 days);
 * - `goodbye_answer_dormant`: `goodbye_sent` → `dormant`.
 */
export type BotTrigger = 'user_message' | 'goodbye_answer_help' | 'goodbye_answer_remind_later' | 'goodbye_answer_dormant';

/** The triggers the scheduler's jobs fire; fire() refuses them (NotABotTriggerError). */
export type JobTrigger = 'inactivity_14d' | 'goodbye_timeout' | 'goodbye_undelivered' | 'reminder_due';

/** Every state, in the table's order. */
export const STATES: readonly EngagementState[];
/** The bot's triggers, in the table's order. */
export const BOT_TRIGGERS: readonly BotTrigger[];

/** Anything with pg's `query`: a `pg.Pool`, a `pg.Client`, a pool's client inside a transaction. */
export interface Queryable {
  query(text: string, values?: any[]): Promise<{ rows: any[]; rowCount: number | null }>;
}

// ---------------------------------------------------------------- fire

/**
 * The SQLSTATEs `engagement_fire` (EN001–EN006), `engagement_receipt` (EN005, EN007) and
 * `engagement_opt_out` / `engagement_opt_in` (EN003, EN005, EN008) raise.
 */
export const SQLSTATE: {
  readonly UNKNOWN_TRIGGER: 'EN001';
  readonly NOT_A_BOT_TRIGGER: 'EN002';
  readonly UNKNOWN_USER: 'EN003';
  readonly INVALID_MOVE: 'EN004';
  readonly INSTANT_OUT_OF_RANGE: 'EN005';
  readonly REQUEST_KEY_OF_ANOTHER_USER: 'EN006';
  readonly UNKNOWN_RECEIPT_STATUS: 'EN007';
  readonly NO_SOURCE: 'EN008';
};
export type EngagementSQLState = 'EN001' | 'EN002' | 'EN003' | 'EN004' | 'EN005' | 'EN006' | 'EN007' | 'EN008';

export interface FireOptions {
  /** The move's instant (a Date or an ISO 8601 string); the transaction's (now()) when absent. */
  at?: Date | string | null;
  /**
   * Makes the call idempotent (e.g. the WhatsApp message id): a later call
   * with the same key changes nothing and returns the state the first one
   * left. Absent or empty: none.
   */
  requestKey?: string | null;
}

/**
 * Applies the bot's trigger to the user and returns the user's state
 * afterwards: one statement, `SELECT engagement_fire($1, $2, $3, $4)`,
 * which checks the move, applies it with its side effects and logs it.
 *
 * Throws, with the user left as they were: {@link UnknownTriggerError}
 * (EN001), {@link NotABotTriggerError} (EN002), {@link UnknownUserError}
 * (EN003), {@link InvalidMoveError} (EN004). Any other error (the
 * database, the connection, a user id that is not a UUID) is pg's, as
 * thrown.
 */
export function fire(client: Queryable, userId: string, trigger: BotTrigger, options?: FireOptions): Promise<EngagementState>;

/** fire bound to a client: `const fire = createFire(pool); await fire(userId, 'user_message')`. */
export function createFire(client: Queryable): (userId: string, trigger: BotTrigger, options?: FireOptions) => Promise<EngagementState>;

/**
 * The {@link EngagementError} for an error pg threw for engagement_fire
 * (e.g. from your own `SELECT engagement_fire(…)`), or null when it is not
 * one of its refusals.
 */
export function engagementError(err: unknown, userId?: string, trigger?: string): EngagementError | null;

export interface EngagementErrorOptions {
  sqlstate?: EngagementSQLState;
  userId?: string;
  trigger?: string;
  cause?: unknown;
  fromState?: EngagementState;
  providerMessageId?: string;
  status?: string;
  source?: string | null;
}

/** A move engagement_fire, a receipt engagement_receipt, or a consent change engagement_opt_out / engagement_opt_in refused; nothing was changed. */
export class EngagementError extends Error {
  constructor(message: string, options?: EngagementErrorOptions);
  /** The SQLSTATE engagement_fire, engagement_receipt, engagement_opt_out or engagement_opt_in raised. */
  readonly sqlstate: EngagementSQLState;
  /** The user the move or the consent change was for (fire's, optOut's and optIn's errors; undefined in receipt's). */
  readonly userId: string;
  /** The trigger fired, as given (fire's errors; undefined in receipt's). */
  readonly trigger: string;
  /** The receipt's provider message id, as given (receipt's errors only). */
  readonly providerMessageId?: string;
  /** The receipt's status, as given (receipt's errors only). */
  readonly status?: string;
  /** The consent change's source, as given (optOut's and optIn's errors only). */
  readonly source?: string | null;
  /** The error pg threw. */
  readonly cause?: unknown;
}
/** EN001: not a trigger of the state machine. */
export class UnknownTriggerError extends EngagementError {
  readonly sqlstate: 'EN001';
}
/** EN002: a trigger of the scheduler's jobs, not a move the bot makes. */
export class NotABotTriggerError extends EngagementError {
  readonly sqlstate: 'EN002';
}
/** EN003: the user has no engagement state (fire), or no `user_profiles` row (optOut, optIn). */
export class UnknownUserError extends EngagementError {
  readonly sqlstate: 'EN003';
}
/** EN004: the trigger is not a move from the user's current state. */
export class InvalidMoveError extends EngagementError {
  readonly sqlstate: 'EN004';
  /** The user's state when the move was refused. */
  readonly fromState: EngagementState;
}
/**
 * EN005: `options.at` (of fire, receipt, optOut or optIn) is infinite, before 2000, or
 * more than 5 minutes ahead of the database clock.
 */
export class InstantOutOfRangeError extends EngagementError {
  readonly sqlstate: 'EN005';
}
/** EN006: `options.requestKey` was used for another user's move; a key is one user's. */
export class RequestKeyOfAnotherUserError extends EngagementError {
  readonly sqlstate: 'EN006';
}

// ---------------------------------------------------------------- receipt

/** A receipt's status, as WhatsApp reports it (Meta's `statuses[].status`; Baileys' acks). */
export type ReceiptStatus = 'sent' | 'delivered' | 'read' | 'failed';

/**
 * What is known of a message after a receipt: `accepted` (sent, no
 * delivery reported yet), `delivered`, `read`, `failed` (at the send, or
 * after acceptance); for a message the queue has not sent, its status.
 */
export type MessageReceiptState = 'accepted' | 'delivered' | 'read' | 'failed' | 'pending' | 'processing' | 'cancelled';

/** The four receipt statuses. */
export const RECEIPT_STATUSES: readonly ReceiptStatus[];

export interface ReceiptOptions {
  /** When WhatsApp says it happened (a Date or an ISO 8601 string); the transaction's time (now()) when absent. */
  at?: Date | string | null;
  /** WhatsApp's error code of a failure (Meta's `errors[0].code`, e.g. 131026), kept in the message's error_message. */
  errorCode?: string | number | null;
}

/** A receipt, as the mappers read it; it is also receipt()'s options (`at`, `errorCode`). */
export interface Receipt {
  /** Baileys' `key.id`, or the Cloud API's `wamid…`. */
  providerMessageId: string;
  status: ReceiptStatus;
  at?: Date;
  errorCode?: string;
}

/**
 * Applies one receipt to the message whose provider id is
 * providerMessageId: one statement, `SELECT engagement_receipt($1, $2, $3,
 * $4)`. Receipts may come again and in any order: a message never moves
 * back. Resolves to what is known of the message now, or null for an id
 * that is none of the scheduler's messages (nothing changed).
 *
 * Throws, with nothing changed: {@link UnknownReceiptStatusError} (EN007),
 * {@link InstantOutOfRangeError} (EN005). Any other error (the database,
 * the connection) is pg's, as thrown; a providerMessageId that is not a
 * string, a TypeError.
 */
export function receipt(client: Queryable, providerMessageId: string, status: ReceiptStatus, options?: ReceiptOptions): Promise<MessageReceiptState | null>;

/** receipt bound to a client: `const receipt = createReceipt(pool); await receipt(id, 'delivered')`. */
export function createReceipt(client: Queryable): (providerMessageId: string, status: ReceiptStatus, options?: ReceiptOptions) => Promise<MessageReceiptState | null>;

/**
 * The {@link EngagementError} for an error pg threw for engagement_receipt
 * (EN005, EN007), or null when it is not one of its refusals.
 */
export function receiptError(err: unknown, providerMessageId?: string, status?: string): EngagementError | null;

/** EN007: the status is not sent, delivered, read or failed. */
export class UnknownReceiptStatusError extends EngagementError {
  readonly sqlstate: 'EN007';
  readonly providerMessageId: string;
  readonly status: string;
}

/**
 * Baileys' WAMessageStatus (`proto.WebMessageInfo.Status` of
 * @whiskeysockets/baileys' WAProto).
 */
export const BAILEYS_STATUS: {
  readonly ERROR: 0;
  readonly PENDING: 1;
  readonly SERVER_ACK: 2;
  readonly DELIVERY_ACK: 3;
  readonly READ: 4;
  readonly PLAYED: 5;
};

/** The part of a Baileys `WAMessageUpdate` (`messages.update`) the mapper reads. */
export interface BaileysMessageUpdate {
  key: { id?: string | null; fromMe?: boolean | null; [field: string]: unknown };
  update: {
    /** A WAMessageStatus number, or its name. */
    status?: number | string | null;
    /** Unix seconds (a number, a string, or a protobufjs Long). */
    messageTimestamp?: number | string | { toNumber(): number } | null;
    messageStubParameters?: (string | null | undefined)[] | null;
    [field: string]: unknown;
  };
}

/**
 * The receipts of a Baileys `messages.update` event, for the messages the
 * bot sent (`key.fromMe`): ERROR → failed (the ack's error code as
 * errorCode), PENDING → none, SERVER_ACK → sent, DELIVERY_ACK → delivered,
 * READ and PLAYED → read; `at` from `messageTimestamp` (Unix seconds).
 */
export function receiptsFromBaileysUpdate(updates: readonly BaileysMessageUpdate[]): Receipt[];

/**
 * The receipts of a WhatsApp Cloud API webhook body (a parsed object, or
 * the raw JSON): `entry[].changes[]` of field `messages`, each
 * `value.statuses[]` entry (id, status, timestamp, errors[0].code).
 * Throws SyntaxError for a string or Buffer that is not JSON.
 */
export function receiptsFromMetaWebhook(body: unknown): Receipt[];

/**
 * Whether header (`X-Hub-Signature-256: sha256=<hex>`) is the HMAC-SHA256
 * of the raw body bytes under the app's secret, compared in constant time.
 */
export function verifyMetaSignature(appSecret: string, rawBody: Uint8Array | string, header: string | string[] | undefined): boolean;

// ---------------------------------------------------------------- consent

/** The sources the project's own doors record (activity/consent.go); a bot may name its own, up to 200 characters. */
export const CONSENT_SOURCES: {
  /** The user wrote a keyword to the bot: optOut's and optIn's default. */
  readonly KEYWORD: 'bot:keyword';
  /** WhatsApp's "stop promotions" / "resume", by Meta's user_preferences webhook (the console). */
  readonly META_USER_PREFERENCES: 'meta:user_preferences';
  /** A send refused, or a failed receipt, with WhatsApp's error 131050. */
  readonly WHATSAPP_131050: 'whatsapp:131050';
  /** An operator, on the console's user page. */
  readonly CONSOLE: 'console';
  /** An operator, by `engagementctl opt-out` / `opt-in`. */
  readonly ENGAGEMENTCTL: 'engagementctl';
};

export interface ConsentOptions {
  /** The door it came through (1 to 200 characters); `'bot:keyword'` when absent (undefined). */
  source?: string | null;
  /**
   * When the user said it (a Date or an ISO 8601 string; {@link messageTime}
   * for a Baileys message); the moment the statement runs when absent. The
   * user's consent follows the newest of their wishes by this instant,
   * whatever order the calls come in: an older call is recorded as
   * superseded and changes nothing (docs/consent.md, "Consent in the user's time").
   */
  at?: Date | string | null;
  /** The operator who recorded it (up to 200 characters); none when absent or empty. */
  actor?: string | null;
}

export interface OptOutOptions extends ConsentOptions {
  /**
   * Queue the opt-out's confirmation (the catalog's
   * `engagement.opt_out.confirmation`, message kind `opt_out_confirmation`),
   * which queue-process sends while the user stays opted out; only when the
   * call changes something and the user said it within the last 24 hours.
   * `false` by default: answer the user yourself, or not at all.
   */
  confirm?: boolean;
}

/**
 * Records that the user wants no more re-engagement messages: one
 * statement, `SELECT engagement_opt_out($1, $2, $3, $4, $5)`, which sets
 * `user_profiles.reengagement_opt_out`, records the change in
 * `engagement_consent_events` and cancels the user's pending messages
 * (`opted_out`). Resolves to whether it changed anything (false: opted out
 * already, nothing recorded; or older than a wish the user made later,
 * recorded as superseded and nothing else: no cancel, no confirmation).
 *
 * Throws, with nothing changed: {@link UnknownUserError} (EN003, no
 * `user_profiles` row), {@link InstantOutOfRangeError} (EN005),
 * {@link NoSourceError} (EN008). Any other error (the database, the
 * connection, a user id that is not a UUID) is pg's, as thrown.
 */
export function optOut(client: Queryable, userId: string, options?: OptOutOptions): Promise<boolean>;

/** Records that the user wants re-engagement messages again (`engagement_opt_in`), as optOut the other way; nothing is requeued. */
export function optIn(client: Queryable, userId: string, options?: ConsentOptions): Promise<boolean>;

/**
 * When the user sent a Baileys message (its `messageTimestamp`, Unix
 * seconds: a number, a string of digits or a protobufjs Long), for
 * optOut's and optIn's `at`; undefined when it carries none.
 */
export function messageTime(msg: { messageTimestamp?: number | string | { toNumber(): number } | null } | null | undefined): Date | undefined;

/** The Date of a Unix-seconds value (a number, a string of digits, or a protobufjs Long); undefined for anything else, 0 included. */
export function unixSeconds(value: unknown): Date | undefined;

/** optOut and optIn bound to a client: `const { optOut } = createConsent(pool); await optOut(userId)`. */
export function createConsent(client: Queryable): {
  optOut(userId: string, options?: OptOutOptions): Promise<boolean>;
  optIn(userId: string, options?: ConsentOptions): Promise<boolean>;
};

/**
 * The {@link EngagementError} for an error pg threw for engagement_opt_out
 * or engagement_opt_in (EN003, EN005, EN008), or null when it is not one of
 * their refusals.
 */
export function consentError(err: unknown, userId?: string, source?: string | null): EngagementError | null;

/** EN008: the source is empty, blank, null or over 200 characters (or the actor over 200). */
export class NoSourceError extends EngagementError {
  readonly sqlstate: 'EN008';
}

/** A locale with its own keyword lists. */
export type KeywordLocale = 'pt-BR' | 'es' | 'en';

/** The opt-out keywords by locale, frozen, as a bot may show them; English STOP is in each. */
export const OPT_OUT_KEYWORDS: Readonly<Record<KeywordLocale, readonly string[]>>;
/** The opt-in keywords by locale, frozen. */
export const OPT_IN_KEYWORDS: Readonly<Record<KeywordLocale, readonly string[]>>;

/**
 * Whether the whole message is one of the locale's opt-out keywords,
 * forgiving case, accents, surrounding whitespace, punctuation and emoji.
 * A keyword inside a sentence is none. The locale is matched by its
 * language (`pt`, `pt-PT` → `pt-BR`); any other locale, or none, uses
 * every list. A text that is not a string is none.
 */
export function isOptOutKeyword(text: unknown, locale?: string | null): boolean;
/** isOptOutKeyword for {@link OPT_IN_KEYWORDS}. */
export function isOptInKeyword(text: unknown, locale?: string | null): boolean;
/** A text as keywords are compared: no accents, upper case, ends stripped, inner whitespace, hyphens and underscores one space. */
export function normalizeKeyword(text: string): string;
/** The list a locale uses, by its language, or `''` (every list) for any other. */
export function keywordLocale(locale?: string | null): KeywordLocale | '';

// ---------------------------------------------------------------- receiver

/** The body queue-process POSTs (docs/reference/formats.md). */
export interface WebhookMessage {
  id: string;
  user_id: string;
  message_type: string;
  message_key?: string | null;
  params?: Record<string, string> | null;
  locale?: string;
  text: string;
  destination: 'individual' | 'group';
  destination_jid: string;
  idempotency_key: string;
  attempt: number;
  [field: string]: unknown;
}

/** What send returns; with Baileys, sock.sendMessage's result (its key.id is the message id). */
export type SendResult = { key?: { id?: string | null } | null } | null | undefined | void;

export interface ReceiverOptions {
  /** The bot's database (a pg.Pool): bot_webhook_deliveries lives there. */
  pool: Queryable;
  /** The webhook secret (queue-process's --webhook-secret). */
  secret: string;
  /** Sends the message to WhatsApp; may throw (the key is released and the request answered 503). */
  send(delivery: { jid: string; text: string; message: WebhookMessage }): SendResult | Promise<SendResult>;
  /** Whether WhatsApp is connected; while not, requests are answered 503. Default: always. */
  connected?: () => boolean;
  /**
   * What Baileys reported of the account (createAccountState): while it
   * holds a refusal, requests are answered with it before anything is
   * claimed or sent; a refusal a send threw is handed to its refused().
   */
  account?: Pick<AccountState, 'answer'> & Partial<Pick<AccountState, 'refused'>>;
  /** Told of each failed send, without the message's JID or text. */
  log?: (line: string) => void;
  /** Told of each repeat dropped (a key already sent). */
  onReplay?: (idempotencyKey: string) => void;
}

/**
 * An HTTP handler for the webhook: checks the signature, answers a refusal
 * of the whole account (AccountAnswer) while one is known, 503 while
 * WhatsApp is not connected, claims the Idempotency-Key, sends once, and
 * answers repeats without sending (docs/receiver.md). It reads the raw body
 * from req itself: mount it before any body parser.
 */
export function createReceiver(options: ReceiverOptions): (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/**
 * Whether header (`X-Engagement-Signature: sha256=<hex>`) is the
 * HMAC-SHA256 of the raw body bytes under secret, compared in constant time.
 */
export function verifySignature(secret: string, body: Uint8Array | string, header: string | string[] | undefined): boolean;

/** The outcome of claimDelivery. */
export type Claim =
  | { outcome: 'claimed' } // send, then markDelivered (or releaseClaim if the send failed)
  | { outcome: 'sent'; messageId: string | null } // a repeat of a sent key: 200 with Idempotent-Replayed: true
  | { outcome: 'sending' } // the first is still sending: 425 with Retry-After
  | { outcome: 'stale' }; // claimed long ago, never marked sent: 409

/** Claims key in bot_webhook_deliveries before sending. */
export function claimDelivery(pool: Queryable, key: string, options?: { staleAfterSeconds?: number }): Promise<Claim>;
/** Records that the claimed key was sent. */
export function markDelivered(pool: Queryable, key: string, messageId?: string | null): Promise<void>;
/** Hands back a claim whose send failed, so that queue-process may try again. */
export function releaseClaim(pool: Queryable, key: string): Promise<void>;
/** Creates bot_webhook_deliveries when missing (createReceiver does it itself). */
export function ensureDeliveriesTable(pool: Queryable): Promise<void>;

/** The CREATE TABLE IF NOT EXISTS of bot_webhook_deliveries. */
export const DELIVERIES_TABLE: string;
/** @deprecated DELIVERIES_TABLE. */
export const TABLE: string;
/** A claim older than this (seconds) that was never marked sent is answered 409. */
export const STALE_CLAIM_SECONDS: number;

// ---------------------------------------------------------------- account

/** A refusal of the bot's whole WhatsApp account (docs/receiver.md, "Account answers"). */
export type AccountError = 'reachout_timelock' | 'rate_overlimit' | 'logged_out' | 'banned';

/** The webhook's HTTP status of each account error: 409, 429, 401, 403. */
export const ACCOUNT_ERROR_STATUS: Readonly<Record<AccountError, 409 | 429 | 401 | 403>>;

/** retry_after_s when Baileys does not say (our choice, documented in docs/receiver.md). */
export const DEFAULT_RETRY_AFTER_S: Readonly<Record<AccountError, number>>;

/** The webhook's answer to a refusal of the whole account. */
export interface AccountAnswer {
  status: 409 | 429 | 401 | 403;
  body: { account_error: AccountError; retry_after_s: number };
}

/** The answer for accountError, waiting retryAfterS seconds (rounded up; its default when not positive). */
export function accountAnswer(accountError: AccountError, retryAfterS?: number): AccountAnswer;

/**
 * The account answer for what Baileys threw while sending: rate-overlimit
 * (data 429), DisconnectReason.loggedOut (401), DisconnectReason.forbidden
 * (403), error 463 (the reach-out timelock); null for anything else (a
 * failure of this one message).
 */
export function accountErrorFrom(err: unknown, options?: { now?: Date; timeEnforcementEnds?: Date }): AccountAnswer | null;

/** Baileys' connection.update, the part createAccountState reads. */
export interface BaileysConnectionUpdate {
  connection?: 'open' | 'connecting' | 'close';
  lastDisconnect?: { error?: unknown; date?: Date };
  reachoutTimeLock?: { isActive: boolean; timeEnforcementEnds?: Date; enforcementType?: string };
  [key: string]: unknown;
}

/** What Baileys said of the account, for the receiver to answer before it sends. */
export interface AccountState {
  /**
   * Baileys' connection.update: sock.ev.on('connection.update', account.connectionUpdate).
   * A reach-out lock without an end is held for DEFAULT_RETRY_AFTER_S.reachout_timelock.
   */
  connectionUpdate(update: BaileysConnectionUpdate, options?: { now?: Date }): void;
  /** Baileys' messages.update (an ack with error 463): sock.ev.on('messages.update', account.messagesUpdate). */
  messagesUpdate(updates: readonly BaileysMessageUpdate[], options?: { now?: Date }): void;
  /** Holds an answer given after a send threw, for its retry_after_s. */
  refused(answer: AccountAnswer, options?: { now?: Date }): void;
  /** The answer to give now, or null when nothing is known against sending. */
  answer(options?: { now?: Date }): AccountAnswer | null;
}

/** A new, empty account state. */
export function createAccountState(): AccountState;
