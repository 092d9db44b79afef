// optOut and optIn over the real engagement_opt_out and engagement_opt_in
// (migration 52): a change and its repeat, pending messages cancelled, the
// consent events with their source and actor, every refusal with its
// class; and the keyword tables, with many near misses, against the lists
// docs/consent.md shows.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { describe, it, before, after } = require('node:test');
const { Client } = require('pg');

const { optOut, optIn, messageTime, createConsent, consentError, EngagementError, UnknownUserError, InstantOutOfRangeError,
  NoSourceError, SQLSTATE, CONSENT_SOURCES, OPT_OUT_KEYWORDS, OPT_IN_KEYWORDS, isOptOutKeyword, isOptInKeyword,
  normalizeKeyword, keywordLocale } = require('@engagement-scheduler/bot');
const { databaseURL, noDatabase, newPool, profileOnly, queuedMessage, consentOf, dbNow } = require('./helpers');

const MINUTE = 60 * 1000;

// refusal checks an error optOut or optIn threw: its class, SQLSTATE and fields.
function refusal(Class, sqlstate, userId, source) {
  return (err) => {
    assert.ok(err instanceof Class, `${err && err.name}: ${err && err.message}; want ${Class.name}`);
    assert.ok(err instanceof EngagementError);
    assert.equal(err.name, Class.name);
    assert.equal(err.sqlstate, sqlstate);
    assert.equal(err.userId, userId);
    assert.equal(err.source, source);
    assert.equal(err.cause && err.cause.code, sqlstate, 'cause: the error pg threw');
    assert.match(err.message, /^engagement consent: /);
    return true;
  };
}

const sameTime = (got, want) => assert.equal(got && got.getTime(), want && want.getTime());

describe('optOut and optIn', { skip: noDatabase }, () => {
  let pool;
  before(() => { pool = newPool(4); });
  after(() => pool.end());

  it('opts out once: true, then false and nothing more recorded; opts in the same way', async () => {
    const user = await profileOnly(pool);
    assert.deepEqual(await consentOf(pool, user), { optedOut: false, events: [] });
    assert.equal(await optOut(pool, user), true);
    let c = await consentOf(pool, user);
    assert.equal(c.optedOut, true);
    assert.equal(c.events.length, 1);
    assert.equal(c.events[0].opted_out, true);
    assert.equal(c.events[0].source, 'bot:keyword', 'the default source');
    assert.equal(c.events[0].actor, null);

    assert.equal(await optOut(pool, user), false, 'opted out already');
    assert.equal(await optOut(pool, user, { source: CONSENT_SOURCES.META_USER_PREFERENCES }), false, 'whatever the door');
    assert.equal((await consentOf(pool, user)).events.length, 1, 'a call that changes nothing records nothing');

    assert.equal(await optIn(pool, user), true);
    assert.equal(await optIn(pool, user), false);
    c = await consentOf(pool, user);
    assert.equal(c.optedOut, false);
    assert.deepEqual(c.events.map((e) => [e.opted_out, e.source]), [[true, 'bot:keyword'], [false, 'bot:keyword']]);
  });

  it('follows the user\'s time: a STOP handled late wins over an older START, whatever the order (issue 56)', async () => {
    const now = await dbNow(pool);
    const user = await profileOnly(pool);
    const sec = (ms) => Math.floor(ms / 1000);
    // Baileys' messages, as messages.upsert gives them: Unix seconds, as a
    // number, a string or a protobufjs Long.
    const stop = { key: { id: 'A1' }, messageTimestamp: sec(now.getTime() - MINUTE) };
    const start = { key: { id: 'A2' }, messageTimestamp: { toNumber: () => sec(now.getTime()) - 3600 } };
    const later = { key: { id: 'A3' }, messageTimestamp: String(sec(now.getTime())) };
    sameTime(messageTime(stop), new Date(sec(now.getTime() - MINUTE) * 1000));
    assert.equal(messageTime({ key: {} }), undefined, 'no timestamp: the call says now');

    assert.equal(await optOut(pool, user, { at: messageTime(stop), confirm: true }), true);
    // The START the user wrote an hour earlier, handled after (a queue, a restart, a history sync).
    assert.equal(await optIn(pool, user, { at: messageTime(start) }), false, 'older than the stop: superseded');
    let c = await consentOf(pool, user);
    assert.equal(c.optedOut, true, 'an older START opted the user back in');
    assert.deepEqual(c.events.map((e) => [e.opted_out, e.superseded]), [[true, false], [false, true]]);
    // A STOP and a START at the same second: the user stays out.
    assert.equal(await optIn(pool, user, { at: messageTime(stop) }), false, 'the same instant: the opt-out wins');
    // Written after the stop, START wins.
    assert.equal(await optIn(pool, user, { at: messageTime(later) }), true);
    // An older STOP with confirm now: superseded, so no confirmation and no cancel.
    const { rows: [{ n: before }] } = await pool.query(
      `SELECT count(*)::int AS n FROM engagement_message_queue WHERE user_id = $1 AND message_type = 'opt_out_confirmation'`, [user]);
    assert.equal(await optOut(pool, user, { at: messageTime(start), confirm: true }), false);
    const { rows: [{ n: after }] } = await pool.query(
      `SELECT count(*)::int AS n FROM engagement_message_queue WHERE user_id = $1 AND message_type = 'opt_out_confirmation'`, [user]);
    assert.equal(after, before, 'a superseded opt-out queued a confirmation');
    c = await consentOf(pool, user);
    assert.equal(c.optedOut, false);
    assert.deepEqual(c.events.map((e) => [e.opted_out, e.superseded]),
      [[true, false], [false, true], [false, true], [false, false], [true, true]]);
  });

  it('records each change with its source, actor and instant', async () => {
    const now = await dbNow(pool);
    const user = await profileOnly(pool);
    const said = new Date(now.getTime() - 30 * MINUTE);
    assert.equal(await optOut(pool, user, { source: 'console', actor: 'ana@example.com', at: said }), true);
    assert.equal(await optIn(pool, user, { source: ' engagementctl ', actor: 'ops', at: new Date(now.getTime() - MINUTE).toISOString() }), true);
    assert.equal(await optOut(pool, user, { source: 'my-bot:menu', actor: '' }), true); // a bot's own source; an empty actor is none
    const { events } = await consentOf(pool, user);
    assert.deepEqual(events.map((e) => [e.opted_out, e.source, e.actor]),
      [[true, 'console', 'ana@example.com'], [false, 'engagementctl', 'ops'], [true, 'my-bot:menu', null]]);
    sameTime(events[0].at, said);
    sameTime(events[1].at, new Date(now.getTime() - MINUTE));
    assert.ok(events[2].at.getTime() >= now.getTime(), 'without at, the moment the statement ran');
  });

  it('an opt-out cancels the user\'s pending messages (opted_out), no one else\'s, and not what was sent; an opt-in requeues nothing', async () => {
    const now = await dbNow(pool);
    const user = await profileOnly(pool);
    const other = await profileOnly(pool);
    const soon = new Date(now.getTime() + 60 * MINUTE);
    const pending = [await queuedMessage(pool, user, 'pending', soon), await queuedMessage(pool, user, 'pending', now)];
    const sent = await queuedMessage(pool, user, 'sent', new Date(now.getTime() - 60 * MINUTE));
    const theirs = await queuedMessage(pool, other, 'pending', soon);
    const statusOf = async (id) => (await pool.query(
      `SELECT status, cancel_reason FROM engagement_message_queue WHERE id = $1`, [id])).rows[0];

    assert.equal(await optOut(pool, user), true);
    for (const id of pending) {
      assert.deepEqual(await statusOf(id), { status: 'cancelled', cancel_reason: 'opted_out' });
    }
    assert.deepEqual(await statusOf(sent), { status: 'sent', cancel_reason: null });
    assert.deepEqual(await statusOf(theirs), { status: 'pending', cancel_reason: null });

    assert.equal(await optIn(pool, user), true);
    for (const id of pending) {
      assert.equal((await statusOf(id)).status, 'cancelled', 'nothing is requeued');
    }
  });

  it('confirm: the opt-out queues its confirmation once, to the user; off by default', async () => {
    const confirmations = async (id) => (await pool.query(
      `SELECT message_key, status, destination_jid FROM engagement_message_queue
        WHERE user_id = $1 AND message_type = 'opt_out_confirmation'`, [id])).rows;
    const quiet = await profileOnly(pool);
    assert.equal(await optOut(pool, quiet), true);
    assert.deepEqual(await confirmations(quiet), [], 'no confirmation unless asked');

    const user = await profileOnly(pool);
    assert.equal(await optOut(pool, user, { confirm: true }), true);
    assert.equal(await optOut(pool, user, { confirm: true }), false, 'opted out already');
    assert.deepEqual(await confirmations(user), [{ message_key: 'engagement.opt_out.confirmation', status: 'pending',
      destination_jid: `55119${user.slice(0, 8)}@s.whatsapp.net` }], 'one confirmation, to the user');
  });

  it('refusals: UnknownUserError (EN003), NoSourceError (EN008), InstantOutOfRangeError (EN005); nothing changed', async () => {
    const now = await dbNow(pool);
    const user = await profileOnly(pool);
    const pendingId = await queuedMessage(pool, user, 'pending', now);
    const stranger = crypto.randomUUID();
    for (const call of [optOut, optIn]) {
      await assert.rejects(call(pool, stranger), refusal(UnknownUserError, 'EN003', stranger, 'bot:keyword'));
      for (const source of ['', '   ', null, 'x'.repeat(201)]) {
        await assert.rejects(call(pool, user, { source }), refusal(NoSourceError, 'EN008', user, source), `source ${JSON.stringify(source)}`);
      }
      await assert.rejects(call(pool, user, { actor: 'a'.repeat(201) }), refusal(NoSourceError, 'EN008', user, 'bot:keyword'));
      for (const at of [new Date(now.getTime() + 10 * MINUTE), new Date('1999-12-31T23:59:59Z'),
        new Date(Math.floor(now.getTime() / 1000) * 1000 * 1000), 'infinity', '-infinity']) {
        await assert.rejects(call(pool, user, { at }), refusal(InstantOutOfRangeError, 'EN005', user, 'bot:keyword'), String(at));
      }
    }
    assert.deepEqual(await consentOf(pool, user), { optedOut: false, events: [] });
    assert.equal((await pool.query(`SELECT status FROM engagement_message_queue WHERE id = $1`, [pendingId])).rows[0].status, 'pending');
    // 200 characters is a source; a minute ahead is a clock's drift.
    assert.equal(await optOut(pool, user, { source: 's'.repeat(200), at: new Date(now.getTime() + MINUTE) }), true);
    // A user id that is not a UUID is pg's error, as thrown.
    await assert.rejects(optOut(pool, 'not-a-uuid'), (err) => !(err instanceof EngagementError) && err.code === '22P02');
  });

  it('maps EN003, EN005 and EN008 to their classes, and nothing else; checks its arguments', async () => {
    assert.equal(SQLSTATE.NO_SOURCE, 'EN008');
    for (const [code, Class] of [['EN003', UnknownUserError], ['EN005', InstantOutOfRangeError], ['EN008', NoSourceError]]) {
      const pgErr = Object.assign(new Error('engagement consent: …'), { code });
      const err = consentError(pgErr, 'u', 's');
      assert.ok(err instanceof Class, code);
      assert.equal(err.sqlstate, code);
      assert.equal(err.cause, pgErr);
      assert.equal(err.userId, 'u');
      assert.equal(err.source, 's');
    }
    for (const other of [new Error('x'), Object.assign(new Error('x'), { code: 'EN007' }), { code: '23505' }, null, undefined, 'EN008']) {
      assert.equal(consentError(other), null);
    }
    const thrown = Object.assign(new Error('connection terminated'), { code: '57P01' });
    await assert.rejects(optOut({ query: async () => { throw thrown; } }, crypto.randomUUID()), (err) => err === thrown);
    await assert.rejects(optOut(undefined, crypto.randomUUID()), TypeError);
    await assert.rejects(optIn({}, crypto.randomUUID()), TypeError);
    await assert.rejects(optOut(pool, crypto.randomUUID(), { at: new Date('nope') }), TypeError);
    assert.throws(() => createConsent(null), TypeError);
    assert.deepEqual(CONSENT_SOURCES, { KEYWORD: 'bot:keyword', META_USER_PREFERENCES: 'meta:user_preferences',
      WHATSAPP_131050: 'whatsapp:131050', CONSOLE: 'console', ENGAGEMENTCTL: 'engagementctl' });
    assert.ok(Object.isFrozen(CONSENT_SOURCES));
  });

  it('works on a pg.Client inside the caller\'s transaction, and bound by createConsent', async () => {
    const user = await profileOnly(pool);
    const client = new Client({ connectionString: databaseURL });
    await client.connect();
    try {
      const consent = createConsent(client);
      await client.query('BEGIN');
      assert.equal(await consent.optOut(user), true);
      await client.query('ROLLBACK');
      assert.deepEqual(await consentOf(pool, user), { optedOut: false, events: [] }, 'rolled back with the caller\'s transaction');
      assert.equal(await consent.optOut(user, { source: 'engagementctl', actor: 'ops' }), true);
      assert.equal(await consent.optIn(user), true);
      assert.deepEqual((await consentOf(pool, user)).events.map((e) => e.opted_out), [true, false]);
    } finally {
      await client.end();
    }
  });
});

// ---------------------------------------------------------------- keywords

describe('isOptOutKeyword and isOptInKeyword', () => {
  it('the whole message, forgiving case, accents, whitespace, punctuation and emoji', () => {
    const yes = {
      'pt-BR': ['PARAR', 'Parar!', 'parar', ' sair. ', 'Sair', 'PARE', 'pare.', 'Cancelar', 'cancelar!!!', 'descadastrar',
        'Descadastrar.', 'não quero mais', 'NÃO QUERO MAIS', 'nao quero mais', 'Não  quero   mais!', 'não quero mais 😡',
        'stop', 'STOP', 'Stop.', '"Parar"', '«parar»', '*PARAR*', '_sair_', '\u200bPARE\u200b', 'PARAR 🛑', '\tparar\n',
        'pàrár', 'SAIR?'],
      es: ['PARAR', 'parar', 'Baja', 'BAJA.', 'baja!', 'cancelar', 'no quiero más', 'NO QUIERO MAS', '¡No quiero más!', '¿baja?',
        'stop', 'Stop!'],
      en: ['STOP', 'stop', 'Stop!', 'unsubscribe', 'Unsubscribe.', 'cancel', 'quit', 'end', 'END.', 'opt out', 'Opt-out',
        'OPT_OUT', 'optout', 'OptOut', ' stop '],
    };
    const no = {
      'pt-BR': ['vou parar de gastar', 'não pare', 'nao pare', 'pare de me mandar?', 'pare de me mandar mensagem', 'parara',
        'parar?? não, continue', 'sairia', 'sai', 'quero sair do grupo', 'não quero mais isso', 'não, quero mais',
        'nao quero', 'quero mais', 'PARAR PARAR', 'stop stop', 'stopp', 'stops', 'p a r a r', 'para', 'cancela',
        'cancelamento', 'descadastro', 'S A I R', 'start', 'unsubscribe', 'baja', 'end', '', '   ', '!!!', '🛑', '👍',
        'ok', 'obrigado', 'sim', 'não', 'parar'.repeat(20)],
      es: ['no pares', 'bajar', 'dar de baja', 'no quiero más mensajes', 'parar de comprar', 'cancelado', 'sair',
        'descadastrar', 'unsubscribe', 'quiero más', 'baja baja'],
      en: ['please stop', 'stop it', 'don\'t stop', 'unsubscribed', 'cancelled', 'the end', 'quitting', 'opt', 'out',
        'opt in', 'parar', 'sair', 'baja', 'stop sending me this'],
    };
    for (const [locale, texts] of Object.entries(yes)) {
      for (const text of texts) {
        assert.equal(isOptOutKeyword(text, locale), true, `${locale} ${JSON.stringify(text)}`);
        assert.equal(isOptOutKeyword(text), true, `${JSON.stringify(text)}, no locale: the union`);
        assert.equal(isOptInKeyword(text, locale), false, `${locale} ${JSON.stringify(text)} is no opt-in`);
      }
    }
    for (const [locale, texts] of Object.entries(no)) {
      for (const text of texts) {
        assert.equal(isOptOutKeyword(text, locale), false, `${locale} ${JSON.stringify(text)}`);
      }
    }
    for (const text of [undefined, null, 42, ['STOP'], { text: 'STOP' }, Buffer.from('STOP')]) {
      assert.equal(isOptOutKeyword(text, 'en'), false, String(text));
      assert.equal(isOptInKeyword(text, 'en'), false, String(text));
    }
  });

  it('STOP counts in every locale; a locale is matched by its language; an unknown one uses every list', () => {
    for (const locale of ['pt-BR', 'pt', 'pt_BR', 'PT-br', 'pt-PT', 'es', 'es-AR', 'es_MX', 'en', 'en-US', 'fr', 'de-DE', '', undefined, null, 7]) {
      assert.equal(isOptOutKeyword('Stop!', locale), true, String(locale));
    }
    assert.equal(keywordLocale('pt-PT'), 'pt-BR');
    assert.equal(keywordLocale('ES-ar'), 'es');
    assert.equal(keywordLocale('en_GB'), 'en');
    for (const locale of ['fr', 'it-IT', 'portuguese', '', undefined, null, 42]) {
      assert.equal(keywordLocale(locale), '', String(locale));
    }
    // An unknown locale: the union of the three lists.
    for (const text of ['sair', 'baja', 'unsubscribe', 'não quero mais', 'no quiero más', 'opt out']) {
      assert.equal(isOptOutKeyword(text, 'fr'), true, text);
    }
    // A known one: its list (and STOP) only.
    assert.equal(isOptOutKeyword('baja', 'pt-BR'), false);
    assert.equal(isOptOutKeyword('sair', 'es'), false);
    assert.equal(isOptOutKeyword('quit', 'pt-BR'), false);
  });

  it('opt-in: specific keywords only, never an opt-out one, never a menu\'s "voltar"', () => {
    const yes = {
      'pt-BR': ['START', 'start', 'Reativar', 'reativar!', 'voltar a receber', 'Quero receber.', 'quero   receber'],
      es: ['START', 'reactivar', 'volver a recibir', 'Quiero recibir'],
      en: ['START', 'Start!', 'unstop', 'resume', 'opt in', 'Opt-In', 'optin'],
    };
    const no = {
      'pt-BR': ['voltar', 'Voltar', 'volta', 'sim', 'ok', 'menu', 'começar', 'quero receber mais tarde', 'não quero receber',
        'nao quero receber', 'reativar depois', 'start now', 'stop', 'parar'],
      es: ['volver', 'sí', 'si', 'alta', 'no quiero recibir', 'stop'],
      en: ['yes', 'back', 'restart', 'started', 'starts', 'subscribe', 'opt', 'in', 'don\'t start', 'stop'],
    };
    for (const [locale, texts] of Object.entries(yes)) {
      for (const text of texts) {
        assert.equal(isOptInKeyword(text, locale), true, `${locale} ${JSON.stringify(text)}`);
        assert.equal(isOptInKeyword(text), true, `${JSON.stringify(text)}, no locale`);
        assert.equal(isOptOutKeyword(text, locale), false, `${locale} ${JSON.stringify(text)} is no opt-out`);
      }
    }
    for (const [locale, texts] of Object.entries(no)) {
      for (const text of texts) {
        assert.equal(isOptInKeyword(text, locale), false, `${locale} ${JSON.stringify(text)}`);
      }
    }
  });

  it('the lists: frozen, STOP in every opt-out list, opt-out and opt-in disjoint, each keyword its own match', () => {
    assert.deepEqual(Object.keys(OPT_OUT_KEYWORDS), ['pt-BR', 'es', 'en']);
    assert.deepEqual(Object.keys(OPT_IN_KEYWORDS), ['pt-BR', 'es', 'en']);
    assert.deepEqual(OPT_OUT_KEYWORDS['pt-BR'],
      ['PARAR', 'PARE', 'SAIR', 'CANCELAR', 'DESCADASTRAR', 'NÃO QUERO MAIS', 'NAO QUERO MAIS', 'STOP']);
    assert.deepEqual(OPT_OUT_KEYWORDS.es, ['PARAR', 'BAJA', 'CANCELAR', 'NO QUIERO MÁS', 'STOP']);
    assert.deepEqual(OPT_OUT_KEYWORDS.en, ['STOP', 'UNSUBSCRIBE', 'CANCEL', 'QUIT', 'END', 'OPT OUT', 'OPTOUT']);
    const outs = new Set();
    for (const lists of [OPT_OUT_KEYWORDS, OPT_IN_KEYWORDS]) {
      assert.ok(Object.isFrozen(lists));
      for (const [locale, words] of Object.entries(lists)) {
        assert.ok(Object.isFrozen(words), locale);
        assert.throws(() => { words.push('X'); }, TypeError);
        for (const word of words) {
          const is = lists === OPT_OUT_KEYWORDS ? isOptOutKeyword : isOptInKeyword;
          assert.equal(is(word, locale), true, `${locale} ${word}`);
          assert.equal(is(word.toLowerCase(), locale), true, `${locale} ${word.toLowerCase()}`);
          if (lists === OPT_OUT_KEYWORDS) {
            outs.add(normalizeKeyword(word));
          } else {
            assert.ok(!outs.has(normalizeKeyword(word)), `${word} is in both`);
          }
        }
      }
      assert.throws(() => { lists.fr = []; }, TypeError);
    }
    for (const words of Object.values(OPT_OUT_KEYWORDS)) {
      assert.ok(words.includes('STOP'));
    }
    assert.equal(normalizeKeyword('  Não-quero_mais!! '), 'NAO QUERO MAIS');
  });

  it('docs/consent.md and the README list exactly the exported keywords', () => {
    // docs/consent.md: each keyword in backticks; the README: comma-separated.
    const tables = [
      [path.join(__dirname, '..', '..', '..', 'docs', 'consent.md'), (cell) => [...cell.matchAll(/`([^`]+)`/g)].map((w) => w[1])],
      [path.join(__dirname, '..', 'README.md'), (cell) => cell.split(',').map((w) => w.trim())],
    ];
    for (const [file, words] of tables) {
      const table = {};
      for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
        const m = /^\| `(pt-BR|es|en)` \|(.*)\|(.*)\|\s*$/.exec(line);
        if (m) {
          table[m[1]] = { out: words(m[2]), in: words(m[3]) };
        }
      }
      assert.deepEqual(Object.keys(table), ['pt-BR', 'es', 'en'], `the keyword table of ${file}`);
      for (const locale of Object.keys(table)) {
        assert.deepEqual(table[locale].out, [...OPT_OUT_KEYWORDS[locale]], `${file}: ${locale} opt-out`);
        assert.deepEqual(table[locale].in, [...OPT_IN_KEYWORDS[locale]], `${file}: ${locale} opt-in`);
      }
    }
  });
});
