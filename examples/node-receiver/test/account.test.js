// Refusals of the whole WhatsApp account: Baileys' errors, built as the
// real @whiskeysockets/baileys builds them (its constants, its Boom, its
// assertNodeErrorFree), mapped to the contract's account answers; the
// account's state from Baileys' events; and the receiver's HTTP answer.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const http = require('node:http');
const { createRequire } = require('node:module');
const { describe, it, before, after } = require('node:test');

const { accountErrorFrom, accountAnswer, createAccountState, createReceiver, ACCOUNT_ERROR_STATUS,
  DEFAULT_RETRY_AFTER_S } = require('@engagement-scheduler/bot');
const { noDatabase, newPool } = require('./helpers');

// Baileys' own @hapi/boom (its dependency), not a copy of ours.
const { Boom } = createRequire(require.resolve('@whiskeysockets/baileys/package.json'))('@hapi/boom');

// The package is ESM: import(). The modules below need nothing of the
// main entry (which needs Node.js 20, see receipt.test.js); on 20 the test
// checks they are the main entry's.
const nodeMajor = Number(process.versions.node.split('.')[0]);
let DisconnectReason, ReachoutTimelockEnforcementType, NACK_REASONS, SERVER_ERROR_CODES, ACCOUNT_RESTRICTED_TEXT,
  assertNodeErrorFree;
before(async () => {
  ({ DisconnectReason, ReachoutTimelockEnforcementType } = await import('@whiskeysockets/baileys/lib/Types/index.js'));
  ({ NACK_REASONS, SERVER_ERROR_CODES, ACCOUNT_RESTRICTED_TEXT } = await import('@whiskeysockets/baileys/lib/Utils/decode-wa-message.js'));
  ({ assertNodeErrorFree } = await import('@whiskeysockets/baileys/lib/WABinary/generic-utils.js'));
});

const now = new Date('2026-11-29T12:00:00Z');

// Baileys' errors, as lib/ builds them.
const baileys = {
  // query() → assertNodeErrorFree on <iq><error code="429" text="rate-overlimit"/></iq>.
  rateOverlimit() {
    try {
      assertNodeErrorFree({ tag: 'iq', attrs: { type: 'error' }, content: [{ tag: 'error', attrs: { code: '429', text: 'rate-overlimit' } }] });
    } catch (err) {
      return err;
    }
    throw new Error('assertNodeErrorFree did not throw');
  },
  // lib/Socket/socket.js, CB:failure: new Boom('Connection Failure', { statusCode: reason, data: node.attrs }).
  failure: (reason) => new Boom('Connection Failure', { statusCode: reason, data: { reason: String(reason), location: 'cln' } }),
  // A query's <error code="403">: about one chat (e.g. a group left), not the account.
  queryError(code, text) {
    try {
      assertNodeErrorFree({ tag: 'iq', attrs: {}, content: [{ tag: 'error', attrs: { code: String(code), text } }] });
    } catch (err) {
      return err;
    }
    throw new Error('assertNodeErrorFree did not throw');
  },
};

describe('accountErrorFrom', () => {
  it('the real package\'s codes are the ones the mapping reads', async () => {
    assert.equal(DisconnectReason.loggedOut, 401);
    assert.equal(DisconnectReason.forbidden, 403);
    assert.equal(NACK_REASONS.SenderReachoutTimelocked, 463);
    assert.equal(SERVER_ERROR_CODES.MessageAccountRestriction, '463');
    if (nodeMajor >= 20) {
      const main = await import('@whiskeysockets/baileys');
      assert.equal(main.DisconnectReason, DisconnectReason, 'the main entry\'s DisconnectReason');
    }
    assert.deepEqual({ ...ACCOUNT_ERROR_STATUS },
      { reachout_timelock: 409, rate_overlimit: 429, logged_out: 401, banned: 403 }, 'the contract\'s statuses');
  });

  it('rate-overlimit, as assertNodeErrorFree throws it (data 429, status 500): 429 rate_overlimit', () => {
    const err = baileys.rateOverlimit();
    assert.equal(err.isBoom, true);
    assert.equal(err.data, 429);
    assert.equal(err.output.statusCode, 500, 'Boom\'s default: the 429 is only in data');
    assert.deepEqual(accountErrorFrom(err, { now }),
      { status: 429, body: { account_error: 'rate_overlimit', retry_after_s: DEFAULT_RETRY_AFTER_S.rate_overlimit } });
  });

  it('DisconnectReason.loggedOut: 401 logged_out; DisconnectReason.forbidden: 403 banned', () => {
    assert.deepEqual(accountErrorFrom(baileys.failure(DisconnectReason.loggedOut)),
      { status: 401, body: { account_error: 'logged_out', retry_after_s: DEFAULT_RETRY_AFTER_S.logged_out } });
    assert.deepEqual(accountErrorFrom(new Boom('Intentional Logout', { statusCode: DisconnectReason.loggedOut })).body.account_error,
      'logged_out', 'sock.logout()\'s Boom');
    assert.deepEqual(accountErrorFrom(baileys.failure(DisconnectReason.forbidden)),
      { status: 403, body: { account_error: 'banned', retry_after_s: DEFAULT_RETRY_AFTER_S.banned } });
  });

  it('error 463, the reach-out timelock: 409 reachout_timelock, retry_after_s from timeEnforcementEnds when known', () => {
    const code = NACK_REASONS.SenderReachoutTimelocked;
    const ends = new Date(now.getTime() + 90 * 60 * 1000 + 400);
    for (const [name, err] of Object.entries({
      'status 463': new Boom('error 463', { statusCode: code }),
      'data 463': new Boom('not sent', { data: code }),
      'Baileys\' text': new Boom(ACCOUNT_RESTRICTED_TEXT),
      'timeEnforcementEnds in data': new Boom('reachout timelock', { statusCode: code, data: { timeEnforcementEnds: ends } }),
    })) {
      const got = accountErrorFrom(err, { now, timeEnforcementEnds: name === 'status 463' ? ends : undefined });
      assert.equal(got.status, 409, name);
      assert.equal(got.body.account_error, 'reachout_timelock', name);
      const want = ['status 463', 'timeEnforcementEnds in data'].includes(name) ? 5401 : DEFAULT_RETRY_AFTER_S.reachout_timelock;
      assert.equal(got.body.retry_after_s, want, `${name}: whole seconds, rounded up`);
    }
  });

  it('anything else is a failure of one message: null', () => {
    for (const [name, err] of Object.entries({
      'Connection Closed (428)': new Boom('Connection Closed', { statusCode: DisconnectReason.connectionClosed }),
      'connectionLost (408)': new Boom('Connection was lost', { statusCode: DisconnectReason.connectionLost }),
      'restartRequired (515)': new Boom('Stream Errored (restart required)', { statusCode: DisconnectReason.restartRequired }),
      'a query\'s 403 (one chat)': baileys.queryError(403, 'forbidden'),
      'a query\'s 401 (one chat)': baileys.queryError(401, 'not-authorized'),
      'All encryptions failed': new Boom('All encryptions failed', { statusCode: 500 }),
      'a plain Error': new Error('socket closed'),
      'a plain object with status 401': { output: { statusCode: 401 } },
      'undefined': undefined,
      'a string': 'rate-overlimit?',
    })) {
      assert.equal(accountErrorFrom(err, { now }), null, name);
    }
  });

  it('index.d.ts names the same account errors, in a type of its own', () => {
    const dts = require('node:fs').readFileSync(require('node:path').join(__dirname, '..', 'index.d.ts'), 'utf8');
    const m = dts.match(/export type AccountError =([^;]*);/);
    assert.ok(m, 'index.d.ts has no type AccountError');
    assert.deepEqual([...m[1].matchAll(/'([a-z_]+)'/g)].map((x) => x[1]), Object.keys(ACCOUNT_ERROR_STATUS));
    for (const name of ['accountErrorFrom', 'accountAnswer', 'createAccountState', 'ACCOUNT_ERROR_STATUS', 'DEFAULT_RETRY_AFTER_S']) {
      assert.match(dts, new RegExp(`export (function|const) ${name}\\b`), name);
    }
  });

  it('accountAnswer: the contract\'s body, a positive whole retry_after_s, no unknown error', () => {
    assert.deepEqual(accountAnswer('banned', 12.2), { status: 403, body: { account_error: 'banned', retry_after_s: 13 } });
    assert.equal(accountAnswer('logged_out', 0).body.retry_after_s, DEFAULT_RETRY_AFTER_S.logged_out);
    assert.throws(() => accountAnswer('suspended'), TypeError);
  });
});

describe('createAccountState', () => {
  // connection.update's reachoutTimeLock as lib/Socket/messages-recv.js
  // (handleReachoutTimelockNotification) and lib/Socket/socket.js
  // (fetchAccountReachoutTimelock) emit it.
  it('follows reachoutTimeLock: held until timeEnforcementEnds, or until lifted when it has no end', () => {
    const account = createAccountState();
    assert.equal(account.answer({ now }), null, 'nothing known: no answer');
    const ends = new Date(now.getTime() + 3600 * 1000);
    account.connectionUpdate({ reachoutTimeLock: { isActive: true, timeEnforcementEnds: ends,
      enforcementType: ReachoutTimelockEnforcementType.BIZ_QUALITY } });
    assert.deepEqual(account.answer({ now }), { status: 409, body: { account_error: 'reachout_timelock', retry_after_s: 3600 } });
    assert.equal(account.answer({ now: new Date(ends.getTime() + 1) }), null, 'over at timeEnforcementEnds');

    account.connectionUpdate({ reachoutTimeLock: { isActive: true, timeEnforcementEnds: undefined,
      enforcementType: ReachoutTimelockEnforcementType.DEFAULT } }, { now }); // fetch: time_enforcement_ends '0'
    const day = DEFAULT_RETRY_AFTER_S.reachout_timelock * 1000;
    assert.equal(account.answer({ now }).body.retry_after_s, DEFAULT_RETRY_AFTER_S.reachout_timelock);
    assert.equal(account.answer({ now: new Date(now.getTime() + day - 1000) }).body.retry_after_s, 1, 'no end: held for the default');
    assert.equal(account.answer({ now: new Date(now.getTime() + day) }), null, 'and no longer: its lifting may never be told');
    account.connectionUpdate({ reachoutTimeLock: { isActive: true, enforcementType: ReachoutTimelockEnforcementType.DEFAULT } });
    account.connectionUpdate({ reachoutTimeLock: { isActive: false, enforcementType: ReachoutTimelockEnforcementType.DEFAULT } });
    assert.equal(account.answer({ now }), null, 'lifted');
    account.connectionUpdate({ connection: 'open' });
    assert.equal(account.answer({ now }), null, 'an update without reachoutTimeLock keeps what was known');
  });

  it('an ack with error 463 in messages.update (handleBadAck) holds a lock until it is lifted, a day at most', () => {
    const account = createAccountState();
    const key = { remoteJid: '5511999990000@s.whatsapp.net', fromMe: true, id: '3EB0A1' };
    account.messagesUpdate([{ key, update: { status: 0, messageStubParameters: ['479'] } }]);
    assert.equal(account.answer({ now }), null, 'another error code');
    const ack = [{ key, update: { status: 0, messageStubParameters: [SERVER_ERROR_CODES.MessageAccountRestriction, ACCOUNT_RESTRICTED_TEXT] } }];
    account.messagesUpdate([{ key: { ...key, fromMe: false }, update: ack[0].update }], { now });
    assert.equal(account.answer({ now }), null, 'not the bot\'s own message');
    account.messagesUpdate(ack, { now });
    assert.deepEqual(account.answer({ now }), accountAnswer('reachout_timelock'));
    assert.equal(account.answer({ now: new Date(now.getTime() + DEFAULT_RETRY_AFTER_S.reachout_timelock * 1000) }), null);
    account.messagesUpdate(ack, { now });
    account.connectionUpdate({ reachoutTimeLock: { isActive: false, enforcementType: ReachoutTimelockEnforcementType.DEFAULT } });
    assert.equal(account.answer({ now }), null);
  });

  it('a close by loggedOut or forbidden holds until the connection is open again; other closes hold nothing', () => {
    const account = createAccountState();
    const close = (statusCode) => account.connectionUpdate({ connection: 'close',
      lastDisconnect: { error: baileys.failure(statusCode), date: now } });
    close(DisconnectReason.loggedOut);
    assert.deepEqual(account.answer({ now }), accountAnswer('logged_out'));
    account.connectionUpdate({ connection: 'connecting' });
    assert.equal(account.answer({ now }).status, 401, 'still logged out while connecting');
    account.connectionUpdate({ connection: 'open' });
    assert.equal(account.answer({ now }), null);
    close(DisconnectReason.forbidden);
    assert.deepEqual(account.answer({ now }), accountAnswer('banned'));
    close(DisconnectReason.connectionClosed);
    assert.equal(account.answer({ now }), null, 'a plain close: the receiver\'s connected() answers it (503)');
  });

  it('refused holds an answer for its retry_after_s', () => {
    const account = createAccountState();
    account.refused(accountAnswer('rate_overlimit', 60), { now });
    assert.deepEqual(account.answer({ now: new Date(now.getTime() + 15 * 1000) }), accountAnswer('rate_overlimit', 45));
    assert.equal(account.answer({ now: new Date(now.getTime() + 60 * 1000) }), null);
  });
});

describe('createReceiver: account answers', { skip: noDatabase }, () => {
  const secret = 'account-test-secret';
  const sign = (body) => 'sha256=' + crypto.createHmac('sha256', secret).update(body).digest('hex');
  const jid = '5511987654321@s.whatsapp.net';
  const text = 'Oi, Maria! Sentimos sua falta.';
  let pool, server, base;
  let account = createAccountState();
  let sendImpl = null;
  const sent = [];
  const logged = [];

  before(async () => {
    pool = newPool(5);
    const handle = createReceiver({
      pool, secret,
      account: { answer: (o) => account.answer(o), refused: (a, o) => account.refused(a, o) }, // reset() swaps it
      send: async (delivery) => {
        sent.push(delivery.message.idempotency_key);
        return sendImpl ? sendImpl(delivery) : { key: { id: 'wa-' + delivery.message.id } };
      },
      log: (line) => logged.push(line),
    });
    server = http.createServer((req, res) => handle(req, res).catch((err) => {
      res.writeHead(500);
      res.end(String(err && err.message));
    }));
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${server.address().port}/engagement`;
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
    await pool.end();
  });

  const message = (fields = {}) => {
    const id = crypto.randomUUID();
    return { id, message_type: 'goodbye', text, destination: 'individual', destination_jid: jid,
      idempotency_key: `k:${id}`, attempt: 1, ...fields };
  };
  async function post(msg, headers = {}) {
    const body = JSON.stringify(msg);
    const res = await fetch(base, { method: 'POST', body, headers: { 'Content-Type': 'application/json',
      'Idempotency-Key': msg.idempotency_key, 'X-Engagement-Signature': sign(body), ...headers } });
    return { status: res.status, body: await res.json() };
  }
  const claimed = async (key) => (await pool.query('SELECT 1 FROM bot_webhook_deliveries WHERE idempotency_key = $1', [key])).rowCount > 0;
  const reset = () => { account = createAccountState(); };

  it('a send that throws a Baileys refusal: its status and body, the claim handed back, no JID or text logged', async () => {
    const cases = [
      [baileys.failure(DisconnectReason.loggedOut), 401, 'logged_out'],
      [baileys.failure(DisconnectReason.forbidden), 403, 'banned'],
      [baileys.rateOverlimit(), 429, 'rate_overlimit'],
      [new Boom('error 463', { statusCode: NACK_REASONS.SenderReachoutTimelocked }), 409, 'reachout_timelock'],
    ];
    for (const [err, status, accountError] of cases) {
      reset();
      const msg = message();
      sendImpl = () => { throw err; };
      try {
        const a = await post(msg);
        assert.equal(a.status, status, accountError);
        assert.deepEqual(a.body, { account_error: accountError, retry_after_s: DEFAULT_RETRY_AFTER_S[accountError] });
        assert.equal(await claimed(msg.idempotency_key), false, `${accountError}: released, so it goes after the pause`);
      } finally {
        sendImpl = null;
      }
    }
    reset();
    assert.ok(logged.some((l) => l.includes('logged_out')), 'the refusal is logged');
    assert.ok(!logged.some((l) => l.includes(jid) || l.includes('987654321') || l.includes(text)), `no JID or text: ${logged}`);
  });

  it('after a refusal, the next request is answered before send() is called', async () => {
    reset();
    const first = message();
    sendImpl = () => { throw baileys.rateOverlimit(); };
    try {
      assert.equal((await post(first)).status, 429);
    } finally {
      sendImpl = null;
    }
    const next = message();
    const a = await post(next);
    assert.equal(a.status, 429);
    assert.equal(a.body.account_error, 'rate_overlimit');
    assert.ok(a.body.retry_after_s > 0 && a.body.retry_after_s <= DEFAULT_RETRY_AFTER_S.rate_overlimit);
    assert.ok(!sent.includes(next.idempotency_key), 'not tried');
    assert.equal(await claimed(next.idempotency_key), false, 'not claimed');
    reset();
    assert.equal((await post(next)).status, 200, 'sent once the refusal is over');
  });

  it('while Baileys reports the account locked or logged out, nothing is sent; a probe is still answered', async () => {
    reset();
    account.connectionUpdate({ reachoutTimeLock: { isActive: true, timeEnforcementEnds: new Date(Date.now() + 7200 * 1000),
      enforcementType: ReachoutTimelockEnforcementType.DEFAULT } });
    const locked = message();
    const a = await post(locked);
    assert.equal(a.status, 409);
    assert.equal(a.body.account_error, 'reachout_timelock');
    assert.ok(a.body.retry_after_s > 7000 && a.body.retry_after_s <= 7200, `retry_after_s ${a.body.retry_after_s}`);
    const probe = { id: crypto.randomUUID(), message_type: 'probe', text: '', idempotency_key: `probe:${crypto.randomUUID()}` };
    assert.equal((await post(probe, { 'X-Engagement-Probe': '1' })).status, 200, 'check-receiver still passes');

    account.connectionUpdate({ reachoutTimeLock: { isActive: false, enforcementType: ReachoutTimelockEnforcementType.DEFAULT } });
    account.connectionUpdate({ connection: 'close', lastDisconnect: { error: baileys.failure(DisconnectReason.loggedOut), date: new Date() } });
    const out = await post(message());
    assert.deepEqual(out, { status: 401, body: { account_error: 'logged_out', retry_after_s: DEFAULT_RETRY_AFTER_S.logged_out } });
    assert.ok(!sent.includes(locked.idempotency_key));
    reset();
  });

  it('a send that fails otherwise: 503 as before, and its log line carries no JID or text', async () => {
    reset();
    const msg = message();
    sendImpl = () => { throw new Boom(`no session for ${jid}: "${text}"`, { statusCode: 500 }); };
    try {
      const a = await post(msg);
      assert.equal(a.status, 503);
      assert.equal(a.body.account_error, undefined);
    } finally {
      sendImpl = null;
    }
    const line = logged.find((l) => l.includes(msg.id));
    assert.ok(line, 'logged');
    assert.ok(!line.includes(jid) && !line.includes('987654321') && !line.includes(text), line);
  });
});
