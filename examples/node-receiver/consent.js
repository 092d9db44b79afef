// consent: a user's "stop" and "resume" of re-engagement messages, one
// call each over the SQL functions engagement_opt_out and engagement_opt_in
// (migration 52; the Go counterparts are activity.OptOut and
// activity.OptIn), and the keywords by which a user says it in a chat
// (isOptOutKeyword, isOptInKeyword). docs/consent.md is the whole story:
// every door, what an opt-out does, LGPD, erase.
//
//   sock.ev.on('messages.upsert', async ({ messages }) => {
//     for (const msg of messages) {
//       const text = msg.message?.conversation ?? msg.message?.extendedTextMessage?.text;
//       if (!msg.key.fromMe && isOptOutKeyword(text, 'pt-BR')) {
//         // source 'bot:keyword', said when the user sent the message
//         await optOut(pool, userIdOf(msg), { confirm: true, at: messageTime(msg) });
//       }
//     }
//   });
//
// optOut sets user_profiles.reengagement_opt_out (the flag the bot and the
// jobs read), records the change in engagement_consent_events (source,
// actor, when) and cancels the user's pending messages ('opted_out'), in
// one statement; with options.confirm it also queues the catalog's
// confirmation (message kind opt_out_confirmation), which queue-process
// sends while the user stays opted out (or answer the user yourself and
// leave it off, the default). optIn clears the flag and records it
// (nothing is requeued). Each resolves to whether it changed anything: false for a
// user already so, and then nothing is recorded, or for a call older than
// a wish the user made later (recorded as superseded, nothing else). The
// user's consent follows the newest of their wishes by options.at, when
// they said it, whatever order the calls come in (docs/consent.md,
// "Consent in the user's time"): pass the message's own time,
// messageTime(msg), so that a "STOP" your bot handles late (a queue, a
// restart, Baileys' history sync) is still ordered by when the user wrote
// it. Refusals throw the EngagementError classes of fire.js, with userId
// and source:
//
//   EN003  UnknownUserError        no user_profiles row for userId
//   EN005  InstantOutOfRangeError  options.at is infinite, before 2000, or more
//                                  than 5 minutes ahead of the database clock
//   EN008  NoSourceError           options.source is empty (or blank), null, or
//                                  over 200 characters; options.actor over 200
//
// Any other error (the database, the connection, a user id that is not a
// UUID) is thrown as pg threw it.
'use strict';

const { EngagementError, UnknownUserError, InstantOutOfRangeError, SQLSTATE } = require('./fire');
const { unixSeconds } = require('./receipt');

// The sources the project's own doors record (activity/consent.go); a bot
// may name its own, up to 200 characters.
const CONSENT_SOURCES = Object.freeze({
  KEYWORD: 'bot:keyword', // the user wrote PARAR, STOP, … to the bot (optOut's and optIn's default)
  META_USER_PREFERENCES: 'meta:user_preferences', // WhatsApp's "stop promotions", by Meta's webhook (the console)
  WHATSAPP_131050: 'whatsapp:131050', // a send refused, or a failed receipt, with WhatsApp's error 131050
  CONSOLE: 'console', // an operator, on the console's user page (actor: who)
  ENGAGEMENTCTL: 'engagementctl', // an operator, by engagementctl opt-out / opt-in (actor: who)
});

// NoSourceError (EN008): options.source is empty, blank, null or over 200
// characters (or options.actor is over 200): a consent change says where
// it came from, for the user's history.
class NoSourceError extends EngagementError {}

const classes = {
  [SQLSTATE.UNKNOWN_USER]: UnknownUserError,
  [SQLSTATE.INSTANT_OUT_OF_RANGE]: InstantOutOfRangeError,
  [SQLSTATE.NO_SOURCE]: NoSourceError,
};

// consentError is the EngagementError for err, an error pg threw for
// engagement_opt_out or engagement_opt_in, or null when err is not one of
// their refusals.
function consentError(err, userId, source) {
  const Class = err && classes[err.code];
  if (!Class) {
    return null;
  }
  return new Class(err.message, { sqlstate: err.code, userId, source, cause: err });
}

const SQL = {
  optOut: 'SELECT engagement_opt_out($1::uuid, $2::text, $3::timestamptz, $4::text, $5::boolean) AS changed',
  optIn: 'SELECT engagement_opt_in($1::uuid, $2::text, $3::timestamptz, $4::text) AS changed',
};

async function consent(name, client, userId, { source = CONSENT_SOURCES.KEYWORD, at, actor, confirm = false } = {}) {
  if (!client || typeof client.query !== 'function') {
    throw new TypeError(`${name}: client must have a query method (a pg.Pool or a pg.Client)`);
  }
  if (at instanceof Date && Number.isNaN(at.getTime())) {
    throw new TypeError(`${name}: options.at is an invalid Date`);
  }
  let result;
  try {
    const params = [userId, source, at == null ? null : at, actor ? actor : null];
    if (name === 'optOut') {
      params.push(confirm === true);
    }
    result = await client.query(SQL[name], params);
  } catch (err) {
    throw consentError(err, userId, source) || err;
  }
  return result.rows[0].changed;
}

// optOut records that the user wants no more re-engagement messages and
// resolves to whether that changed anything (false: opted out already,
// nothing recorded; or superseded by a resume the user said later).
// client is anything with pg's query (a pg.Pool, a pg.Client, a pool's
// client inside your own transaction). options.source is the door it came
// through ('bot:keyword' by default: the user wrote a keyword);
// options.at (a Date or an ISO 8601 string) when the user said it
// (messageTime(msg) for a Baileys message), the moment the statement runs
// by default; options.actor the operator who recorded it, if one did;
// options.confirm (false by default) queues the opt-out's confirmation
// message (the catalog's engagement.opt_out.confirmation) when the call
// changed something and the user said it within the last 24 hours.
function optOut(client, userId, options) {
  return consent('optOut', client, userId, options);
}

// optIn records that the user wants re-engagement messages again, as
// optOut does the other way; nothing cancelled is requeued.
function optIn(client, userId, options) {
  return consent('optIn', client, userId, options);
}

// messageTime is when the user sent a Baileys message (its
// messageTimestamp, Unix seconds: a number, a string of digits or a
// protobufjs Long) as a Date, for optOut's and optIn's options.at; or
// undefined when the message carries none (the call then says "now").
function messageTime(msg) {
  return unixSeconds(msg && msg.messageTimestamp);
}

// createConsent binds optOut and optIn to client:
// const { optOut } = createConsent(pool); await optOut(userId).
function createConsent(client) {
  if (!client || typeof client.query !== 'function') {
    throw new TypeError('createConsent: client must have a query method (a pg.Pool or a pg.Client)');
  }
  return {
    optOut: (userId, options) => optOut(client, userId, options),
    optIn: (userId, options) => optIn(client, userId, options),
  };
}

// ---------------------------------------------------------------- keywords

// The keywords by which a user says "stop" (OPT_OUT_KEYWORDS) or "resume"
// (OPT_IN_KEYWORDS), by locale, as a bot may show them ("responda PARAR
// para não receber mais"). docs/consent.md lists the same (a test checks).
// English STOP is in every locale: WhatsApp users type it everywhere.
//
// Opt-in keywords are deliberately specific: "VOLTAR" / "VOLVER" (back, in
// most bots' menus) and "SIM" are not among them, so that a user who opted
// out is not opted back in by navigating a menu; consent given back must be
// unambiguous (LGPD art. 5, XII).
const freezeLists = (lists) => Object.freeze(Object.fromEntries(
  Object.entries(lists).map(([locale, words]) => [locale, Object.freeze(words)])));

const OPT_OUT_KEYWORDS = freezeLists({
  'pt-BR': ['PARAR', 'PARE', 'SAIR', 'CANCELAR', 'DESCADASTRAR', 'NÃO QUERO MAIS', 'NAO QUERO MAIS', 'STOP'],
  es: ['PARAR', 'BAJA', 'CANCELAR', 'NO QUIERO MÁS', 'STOP'],
  en: ['STOP', 'UNSUBSCRIBE', 'CANCEL', 'QUIT', 'END', 'OPT OUT', 'OPTOUT'],
});

const OPT_IN_KEYWORDS = freezeLists({
  'pt-BR': ['REATIVAR', 'VOLTAR A RECEBER', 'QUERO RECEBER', 'START'],
  es: ['REACTIVAR', 'VOLVER A RECIBIR', 'QUIERO RECIBIR', 'START'],
  en: ['START', 'UNSTOP', 'RESUME', 'OPT IN', 'OPTIN'],
});

// A message longer than this is no keyword (and is not normalized).
const MAX_KEYWORD_MESSAGE = 64;

// Stripped from both ends: whitespace, punctuation, symbols (emoji
// included), and invisible format characters (zero-width joiners, marks
// of direction).
const EDGES = /^[\s\p{P}\p{S}\p{Z}\p{Cc}\p{Cf}]+|[\s\p{P}\p{S}\p{Z}\p{Cc}\p{Cf}]+$/gu;

// normalizeKeyword is text as keywords are compared: accents and other
// combining marks removed (NFD), upper case, whitespace, punctuation and
// symbols stripped from both ends, inner runs of whitespace, hyphens and
// underscores one space ("opt-out" is "OPT OUT"). Inner punctuation is kept:
// "não, quero mais" is no keyword.
function normalizeKeyword(text) {
  return text
    .normalize('NFD')
    .replace(/\p{M}+/gu, '')
    .toUpperCase()
    .replace(EDGES, '')
    .replace(/[\s\p{Z}\-_]+/gu, ' ');
}

const keywordSets = (lists) => {
  const sets = Object.fromEntries(Object.entries(lists).map(([locale, words]) => [locale, new Set(words.map(normalizeKeyword))]));
  sets[''] = new Set(Object.values(sets).flatMap((set) => [...set])); // the union, for an unknown locale
  return sets;
};
const OPT_OUT_SETS = keywordSets(OPT_OUT_KEYWORDS);
const OPT_IN_SETS = keywordSets(OPT_IN_KEYWORDS);

// keywordLocale is the list a locale uses: by its language ('pt', 'pt-BR',
// 'pt_PT' → 'pt-BR'; 'es-AR' → 'es'; 'en-US' → 'en'), or '' (the union of
// every list) for any other locale, or none.
function keywordLocale(locale) {
  const language = typeof locale === 'string' ? locale.trim().toLowerCase().split(/[-_]/)[0] : '';
  return { pt: 'pt-BR', es: 'es', en: 'en' }[language] || '';
}

function isKeyword(sets, text, locale) {
  if (typeof text !== 'string' || text.length > MAX_KEYWORD_MESSAGE) {
    return false;
  }
  const word = normalizeKeyword(text);
  return word !== '' && sets[keywordLocale(locale)].has(word);
}

// isOptOutKeyword says whether the whole message text is one of the
// locale's opt-out keywords, forgiving case, accents, surrounding
// whitespace, punctuation and emoji ("Parar!", " sair. ", "não quero
// mais", "STOP 🛑"). A keyword inside a sentence is none ("vou parar de
// gastar", "não pare", "pare de me mandar?"), nor is a longer word
// ("parara"). An unknown locale (or none) uses every list.
function isOptOutKeyword(text, locale) {
  return isKeyword(OPT_OUT_SETS, text, locale);
}

// isOptInKeyword is isOptOutKeyword for OPT_IN_KEYWORDS ("START",
// "reativar", "quero receber").
function isOptInKeyword(text, locale) {
  return isKeyword(OPT_IN_SETS, text, locale);
}

module.exports = {
  optOut,
  optIn,
  messageTime,
  createConsent,
  consentError,
  NoSourceError,
  CONSENT_SOURCES,
  OPT_OUT_KEYWORDS,
  OPT_IN_KEYWORDS,
  isOptOutKeyword,
  isOptInKeyword,
  normalizeKeyword,
  keywordLocale,
};
