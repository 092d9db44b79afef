// The webhook receiver: the signature check, and createReceiver over HTTP
// against the real PostgreSQL (de-duplication by Idempotency-Key).
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const http = require('node:http');
const { describe, it, before, after } = require('node:test');

const { createReceiver, verifySignature, claimDelivery, markDelivered, releaseClaim, ensureDeliveriesTable,
  STALE_CLAIM_SECONDS } = require('@engagement-scheduler/bot');
const { noDatabase, newPool } = require('./helpers');

const secret = 'package-test-secret';
const sign = (body, key = secret) => 'sha256=' + crypto.createHmac('sha256', key).update(body).digest('hex');

describe('verifySignature', () => {
  const body = Buffer.from('{"id":"m1","text":"olá"}', 'utf8');

  it('accepts the HMAC-SHA256 of the raw body under the secret', () => {
    assert.equal(verifySignature(secret, body, sign(body)), true);
    assert.equal(verifySignature(secret, body.toString('utf8'), sign(body)), true, 'the body as a string');
    assert.equal(verifySignature(secret, new Uint8Array(body), sign(body)), true, 'as a Uint8Array');
    assert.equal(verifySignature(secret, body, sign(body).toUpperCase()), true, 'hex in capitals');
    assert.equal(verifySignature(secret, Buffer.alloc(0), sign(Buffer.alloc(0))), true, 'an empty body');
  });

  it('refuses any other signature, and anything missing or malformed', () => {
    const good = sign(body);
    const cases = {
      'another secret': [secret, body, sign(body, 'other')],
      'a changed body': [secret, Buffer.from('{"id":"m1","text":"ola"}'), good],
      'the body parsed and serialised again': [secret, JSON.stringify(JSON.parse('{"id": "m1"}')), sign('{"id": "m1"}')],
      'no header': [secret, body, undefined],
      'an empty header': [secret, body, ''],
      'a header repeated (an array)': [secret, body, [good, good]],
      'no sha256= prefix': [secret, body, good.slice('sha256='.length)],
      'another algorithm': [secret, body, good.replace('sha256=', 'sha1=')],
      'a truncated signature': [secret, body, good.slice(0, -2)],
      'one stray character more': [secret, body, good + 'z'],
      'one hex digit more': [secret, body, good + 'a'],
      'not hex': [secret, body, 'sha256=' + 'zz'.repeat(32)],
      'no secret': ['', body, sign(body, '')],
      'an undefined secret': [undefined, body, good],
      'no body': [secret, undefined, good],
    };
    for (const [name, [key, b, header]] of Object.entries(cases)) {
      assert.equal(verifySignature(key, b, header), false, name);
    }
  });
});

describe('createReceiver', { skip: noDatabase }, () => {
  let pool, server, base;
  let connected = true;
  let sendImpl = null;
  const sent = [];
  const replays = [];
  const logged = [];

  before(async () => {
    pool = newPool(10);
    const handle = createReceiver({
      pool, secret,
      send: async (delivery) => {
        sent.push(delivery);
        if (sendImpl) {
          return sendImpl(delivery);
        }
        return { key: { id: 'wa-' + delivery.message.id } };
      },
      connected: () => connected,
      onReplay: (key) => replays.push(key),
      log: (line) => logged.push(line),
    });
    server = http.createServer((req, res) => {
      handle(req, res).catch((err) => {
        res.writeHead(500);
        res.end(String(err && err.message));
      });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${server.address().port}/engagement`;
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
    await pool.end();
  });

  function message(fields = {}) {
    const id = crypto.randomUUID();
    return { id, user_id: crypto.randomUUID(), message_type: 'weekly_review', text: 'Oi!', destination: 'individual',
      destination_jid: '5511999990000@s.whatsapp.net', idempotency_key: `k:${id}`, attempt: 1, ...fields };
  }

  // post delivers msg as queue-process does; options override the key,
  // the signature and the raw body.
  async function post(msg, { key = msg && msg.idempotency_key, signature, raw, headers = {} } = {}) {
    const body = raw !== undefined ? raw : JSON.stringify(msg);
    const h = { 'Content-Type': 'application/json', ...headers };
    if (key !== null) {
      h['Idempotency-Key'] = key;
    }
    h['X-Engagement-Signature'] = signature !== undefined ? signature : sign(body);
    if (h['X-Engagement-Signature'] === null) {
      delete h['X-Engagement-Signature'];
    }
    const res = await fetch(base, { method: 'POST', headers: h, body });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
  }

  const sentKeys = () => sent.map((d) => d.message.idempotency_key);
  const rowOf = async (key) => (await pool.query('SELECT status, message_id FROM bot_webhook_deliveries WHERE idempotency_key = $1', [key])).rows[0];

  it('sends a signed message once, and drops its repeats without sending', async () => {
    const msg = message();
    const first = await post(msg);
    assert.equal(first.status, 200);
    assert.deepEqual(first.body, { message_id: `wa-${msg.id}` });
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const delivery = sent.find((d) => d.message.id === msg.id);
    assert.equal(delivery.jid, msg.destination_jid);
    assert.equal(delivery.text, msg.text);
    assert.deepEqual(delivery.message, msg);
    assert.deepEqual(await rowOf(msg.idempotency_key), { status: 'sent', message_id: `wa-${msg.id}` });

    for (let i = 0; i < 3; i++) {
      const repeat = await post({ ...msg, attempt: 2 + i });
      assert.equal(repeat.status, 200);
      assert.equal(repeat.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(repeat.body, { duplicate: true, message_id: `wa-${msg.id}` });
    }
    assert.equal(sentKeys().filter((k) => k === msg.idempotency_key).length, 1, 'sent once');
    assert.equal(replays.filter((k) => k === msg.idempotency_key).length, 3, 'onReplay told of each repeat');
  });

  it('a repeat racing the first delivery is not sent twice', async () => {
    const msg = message();
    const answers = await Promise.all(Array.from({ length: 10 }, () => post(msg)));
    assert.equal(sentKeys().filter((k) => k === msg.idempotency_key).length, 1);
    for (const a of answers) {
      assert.ok([200, 425].includes(a.status), `HTTP ${a.status}`);
    }
  });

  it('a bad or missing signature: 401, nothing claimed, nothing sent', async () => {
    const msg = message();
    for (const signature of [sign(JSON.stringify(msg), 'wrong-secret'), null, 'sha256=', 'garbage']) {
      const a = await post(msg, { signature });
      assert.equal(a.status, 401, String(signature));
    }
    const tampered = JSON.stringify({ ...msg, text: 'Pay here: …' });
    assert.equal((await post(msg, { raw: tampered, signature: sign(JSON.stringify(msg)) })).status, 401);
    assert.equal(await rowOf(msg.idempotency_key), undefined);
    assert.ok(!sentKeys().includes(msg.idempotency_key));
  });

  it('WhatsApp not connected: 503 before claiming, sent once it is', async () => {
    const msg = message();
    connected = false;
    try {
      const a = await post(msg);
      assert.equal(a.status, 503);
      assert.equal(a.headers.get('retry-after'), '30');
      assert.equal(await rowOf(msg.idempotency_key), undefined, 'not claimed');
    } finally {
      connected = true;
    }
    assert.equal((await post(msg)).status, 200);
    assert.equal(sentKeys().filter((k) => k === msg.idempotency_key).length, 1);
  });

  it('a send that throws: 503, the claim handed back, sent on the retry', async () => {
    const msg = message();
    sendImpl = () => { throw new Error('socket closed'); };
    try {
      const a = await post(msg);
      assert.equal(a.status, 503);
      assert.equal(await rowOf(msg.idempotency_key), undefined, 'released');
      assert.ok(logged.some((l) => l.includes(msg.id) && l.includes('socket closed')), 'logged');
    } finally {
      sendImpl = null;
    }
    const retry = await post({ ...msg, attempt: 2 });
    assert.equal(retry.status, 200);
    assert.equal(retry.headers.get('idempotent-replayed'), null, 'taken as new');
  });

  it('a repeat while the first is still sending: 425, then the repeat of the sent key is dropped', async () => {
    const msg = message();
    let release;
    const gate = new Promise((resolve) => { release = resolve; });
    let started;
    const sending = new Promise((resolve) => { started = resolve; });
    sendImpl = async () => { started(); await gate; return { key: { id: 'slow' } }; };
    const first = post(msg);
    try {
      await sending;
      const during = await post(msg);
      assert.equal(during.status, 425);
      assert.equal(during.headers.get('retry-after'), '5');
    } finally {
      sendImpl = null;
      release();
    }
    assert.equal((await first).status, 200);
    const after = await post(msg);
    assert.equal(after.status, 200);
    assert.equal(after.headers.get('idempotent-replayed'), 'true');
    assert.equal(sentKeys().filter((k) => k === msg.idempotency_key).length, 1);
  });

  it('a key claimed long ago and never marked sent: 409, never sent', async () => {
    const msg = message();
    await pool.query(`INSERT INTO bot_webhook_deliveries (idempotency_key, status, received_at)
                      VALUES ($1, 'sending', now() - make_interval(secs => $2))`, [msg.idempotency_key, STALE_CLAIM_SECONDS + 60]);
    const a = await post(msg);
    assert.equal(a.status, 409);
    assert.ok(!sentKeys().includes(msg.idempotency_key));
  });

  it('a probe is checked and de-duplicated but never sent', async () => {
    const probe = { id: crypto.randomUUID(), message_type: 'probe', text: '', idempotency_key: `probe:${crypto.randomUUID()}` };
    const headers = { 'X-Engagement-Probe': '1' };
    connected = false; // a probe is answered even then
    try {
      assert.equal((await post(probe, { signature: sign('x'), headers })).status, 401);
      const first = await post(probe, { headers });
      assert.equal(first.status, 200);
      assert.equal(first.headers.get('idempotent-replayed'), null);
      const repeat = await post(probe, { headers });
      assert.equal(repeat.status, 200);
      assert.equal(repeat.headers.get('idempotent-replayed'), 'true');
    } finally {
      connected = true;
    }
    assert.ok(!sent.some((d) => d.message.id === probe.id));
  });

  it('a request without a key or with a body that is not JSON: 400', async () => {
    assert.equal((await post(message(), { key: null })).status, 400);
    assert.equal((await post(null, { key: 'k:not-json', raw: '{"id":' })).status, 400);
    assert.equal((await post(null, { key: 'k:null', raw: 'null' })).status, 400);
  });

  it('refuses to start without a secret, a pool or a send function', () => {
    assert.throws(() => createReceiver({ pool, send: () => {} }), /secret/);
    assert.throws(() => createReceiver({ secret, send: () => {} }), TypeError);
    assert.throws(() => createReceiver({ pool, secret }), TypeError);
  });

  it('the steps one by one, for a bot with its own HTTP framework', async () => {
    await ensureDeliveriesTable(pool);
    const key = `k:${crypto.randomUUID()}`;
    assert.deepEqual(await claimDelivery(pool, key), { outcome: 'claimed' });
    assert.deepEqual(await claimDelivery(pool, key), { outcome: 'sending' });
    assert.deepEqual(await claimDelivery(pool, key, { staleAfterSeconds: -1 }), { outcome: 'stale' });
    await releaseClaim(pool, key);
    assert.deepEqual(await claimDelivery(pool, key), { outcome: 'claimed' });
    await markDelivered(pool, key, 'wa-1');
    assert.deepEqual(await claimDelivery(pool, key), { outcome: 'sent', messageId: 'wa-1' });
    await releaseClaim(pool, key); // a sent key is never handed back
    assert.deepEqual(await claimDelivery(pool, key), { outcome: 'sent', messageId: 'wa-1' });
  });
});
