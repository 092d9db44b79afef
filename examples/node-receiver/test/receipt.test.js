// receipt over the real engagement_receipt (migration 49): receipts in and
// out of order, repeated, for ids not the scheduler's, refused with their
// error classes, a late failure; and the two mappers, Baileys'
// messages.update against the real package's WAMessageStatus numbers, and
// Meta's Cloud API webhook with its signature.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { describe, it, before, after } = require('node:test');
const { Client } = require('pg');

const { receipt, createReceipt, receiptError, EngagementError, UnknownReceiptStatusError, InstantOutOfRangeError,
  SQLSTATE, RECEIPT_STATUSES, BAILEYS_STATUS, receiptsFromBaileysUpdate, receiptsFromMetaWebhook,
  verifyMetaSignature } = require('@engagement-scheduler/bot');
const { databaseURL, noDatabase, newPool, sentMessage, messageOf, dbNow } = require('./helpers');

const MINUTE = 60 * 1000;
const providerId = (prefix = 'wamid.') => `${prefix}${crypto.randomBytes(12).toString('hex').toUpperCase()}`;

// refusal checks an error receipt threw: its class, SQLSTATE and fields.
function refusal(Class, sqlstate, providerMessageId, status) {
  return (err) => {
    assert.ok(err instanceof Class, `${err && err.name}: ${err && err.message}; want ${Class.name}`);
    assert.ok(err instanceof EngagementError);
    assert.equal(err.name, Class.name);
    assert.equal(err.sqlstate, sqlstate);
    assert.equal(err.providerMessageId, providerMessageId);
    assert.equal(err.status, status);
    assert.equal(err.cause && err.cause.code, sqlstate, 'cause: the error pg threw');
    assert.match(err.message, /^engagement_receipt: /);
    return true;
  };
}

const sameTime = (got, want) => assert.equal(got && got.getTime(), want && want.getTime());

describe('receipt', { skip: noDatabase }, () => {
  let pool;
  before(() => { pool = newPool(4); });
  after(() => pool.end());

  it('receipts in order: accepted, delivered, read, each instant kept', async () => {
    const now = await dbNow(pool);
    const sent = new Date(now.getTime() - 60 * MINUTE);
    const pid = providerId();
    const id = await sentMessage(pool, pid, sent);
    const t1 = new Date(sent.getTime() + MINUTE);
    const t2 = new Date(sent.getTime() + 10 * MINUTE);

    assert.equal(await receipt(pool, pid, 'sent', { at: sent }), 'accepted');
    let m = await messageOf(pool, id);
    assert.equal(m.status, 'sent');
    assert.equal(m.delivered_at, null);
    assert.equal(await receipt(pool, pid, 'delivered', { at: t1 }), 'delivered');
    sameTime((await messageOf(pool, id)).delivered_at, t1);
    assert.equal(await receipt(pool, pid, 'read', { at: t2.toISOString() }), 'read'); // an ISO string too
    m = await messageOf(pool, id);
    assert.equal(m.status, 'sent');
    sameTime(m.delivered_at, t1);
    sameTime(m.read_at, t2);
    assert.equal(m.error_message, null);
  });

  it('out of order and repeated: a message never moves back', async () => {
    const now = await dbNow(pool);
    const sent = new Date(now.getTime() - 60 * MINUTE);
    const pid = providerId();
    const id = await sentMessage(pool, pid, sent);
    const t1 = new Date(sent.getTime() + MINUTE);
    const t2 = new Date(sent.getTime() + 10 * MINUTE);
    const steps = [
      ['read', t2, 'read', t2, t2], // read first: delivered too
      ['delivered', t1, 'read', t1, t2], // an older delivery: the first delivery
      ['delivered', t2, 'read', t1, t2], // a repeat, later: nothing
      ['read', new Date(t2.getTime() + 30 * MINUTE), 'read', t1, t2], // read again, later: nothing
      ['read', t2, 'read', t1, t2], // the same receipt again: nothing
      ['sent', now, 'read', t1, t2], // sent after read: nothing
      ['failed', t2, 'read', t1, t2], // failed after delivery: nothing
    ];
    for (const [i, [status, at, want, delivered, read]] of steps.entries()) {
      assert.equal(await receipt(pool, pid, status, { at, errorCode: '131026' }), want, `step ${i} (${status})`);
      const m = await messageOf(pool, id);
      assert.equal(m.status, 'sent', `step ${i}`);
      sameTime(m.delivered_at, delivered);
      sameTime(m.read_at, read);
      assert.equal(m.error_message, null, `step ${i}`);
    }
  });

  it('an id that is none of the scheduler\'s: null, nothing changed, no error', async () => {
    const now = await dbNow(pool);
    const pid = providerId();
    const id = await sentMessage(pool, pid, new Date(now.getTime() - MINUTE));
    const before = await messageOf(pool, id);
    for (const status of RECEIPT_STATUSES) {
      assert.equal(await receipt(pool, providerId(), status), null, status);
      assert.equal(await receipt(pool, '', status), null, `${status}, an empty id`);
    }
    assert.equal(await receipt(pool, pid.toLowerCase(), 'read'), null, 'ids are compared exactly');
    assert.deepEqual(await messageOf(pool, id), before);
  });

  it('a late failure fails the message with its code, not in doubt; a delivery after it changes nothing', async () => {
    const now = await dbNow(pool);
    const pid = providerId();
    const id = await sentMessage(pool, pid, new Date(now.getTime() - 60 * MINUTE));
    assert.equal(await receipt(pool, pid, 'sent'), 'accepted');
    assert.equal(await receipt(pool, pid, 'failed', { errorCode: 131026 }), 'failed'); // Meta's code is a number
    let m = await messageOf(pool, id);
    assert.equal(m.status, 'failed');
    assert.match(m.error_message, /131026/);
    assert.equal(m.in_doubt, false);
    assert.equal(m.delivered_at, null);
    assert.equal(await receipt(pool, pid, 'delivered'), 'failed');
    assert.equal(await receipt(pool, pid, 'read'), 'failed');
    assert.equal(await receipt(pool, pid, 'failed', { errorCode: '131049' }), 'failed');
    m = await messageOf(pool, id);
    assert.equal(m.delivered_at, null);
    assert.equal(m.read_at, null);
    assert.match(m.error_message, /131026/, 'the first failure\'s code is kept');

    // Without a code, the error says so.
    const pid2 = providerId();
    const id2 = await sentMessage(pool, pid2, new Date(now.getTime() - 60 * MINUTE));
    assert.equal(await receipt(pool, pid2, 'failed', { errorCode: '' }), 'failed');
    assert.match((await messageOf(pool, id2)).error_message, /no code/);
  });

  it('an unknown status: UnknownReceiptStatusError (EN007), nothing changed', async () => {
    const now = await dbNow(pool);
    const pid = providerId();
    const id = await sentMessage(pool, pid, new Date(now.getTime() - MINUTE));
    const before = await messageOf(pool, id);
    for (const status of ['deleted', 'played', 'DELIVERED', '', null]) {
      await assert.rejects(receipt(pool, pid, status), refusal(UnknownReceiptStatusError, 'EN007', pid, status));
    }
    // Even for an id that is not the scheduler's: the bot's bug shows at once.
    const other = providerId();
    await assert.rejects(receipt(pool, other, 'seen'), refusal(UnknownReceiptStatusError, 'EN007', other, 'seen'));
    assert.deepEqual(await messageOf(pool, id), before);
  });

  it('an instant out of range: InstantOutOfRangeError (EN005), nothing changed', async () => {
    const now = await dbNow(pool);
    const pid = providerId();
    const id = await sentMessage(pool, pid, new Date(now.getTime() - MINUTE));
    const before = await messageOf(pool, id);
    const seconds = Math.floor(now.getTime() / 1000);
    for (const at of [new Date(seconds * 1000 * 1000), new Date('1999-12-31T23:59:59Z'), new Date(now.getTime() + 10 * MINUTE),
      'infinity', '-infinity']) {
      await assert.rejects(receipt(pool, pid, 'delivered', { at }), refusal(InstantOutOfRangeError, 'EN005', pid, 'delivered'), String(at));
    }
    assert.deepEqual(await messageOf(pool, id), before);
    // A minute ahead is a clock's drift: accepted.
    assert.equal(await receipt(pool, pid, 'delivered', { at: new Date(now.getTime() + MINUTE) }), 'delivered');
  });

  it('without at, the transaction\'s time', async () => {
    const now = await dbNow(pool);
    const pid = providerId();
    const id = await sentMessage(pool, pid, new Date(now.getTime() - MINUTE));
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query('SELECT now() AS now');
      assert.equal(await receipt(client, pid, 'read', { at: null }), 'read');
      const m = await messageOf(client, id);
      sameTime(m.delivered_at, rows[0].now);
      sameTime(m.read_at, rows[0].now);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  });

  it('maps EN005 and EN007 to their classes, and nothing else; any other error is thrown as is', async () => {
    assert.equal(SQLSTATE.UNKNOWN_RECEIPT_STATUS, 'EN007');
    for (const [code, Class] of [['EN007', UnknownReceiptStatusError], ['EN005', InstantOutOfRangeError]]) {
      const pgErr = Object.assign(new Error('engagement_receipt: …'), { code });
      const err = receiptError(pgErr, 'wamid.X', 'read');
      assert.ok(err instanceof Class, code);
      assert.equal(err.sqlstate, code);
      assert.equal(err.cause, pgErr);
      assert.equal(err.providerMessageId, 'wamid.X');
      assert.equal(err.status, 'read');
    }
    for (const other of [new Error('x'), Object.assign(new Error('x'), { code: 'EN001' }), { code: '23505' }, null, undefined, 'EN007']) {
      assert.equal(receiptError(other), null);
    }
    const thrown = Object.assign(new Error('connection terminated'), { code: '57P01' });
    await assert.rejects(receipt({ query: async () => { throw thrown; } }, 'wamid.X', 'read'), (err) => err === thrown);
    await assert.rejects(receipt(undefined, 'wamid.X', 'read'), TypeError);
    await assert.rejects(receipt({}, 'wamid.X', 'read'), TypeError);
    await assert.rejects(receipt(pool, { id: 'wamid.X' }, 'read'), TypeError, 'a key, not its id');
    await assert.rejects(receipt(pool, undefined, 'read'), TypeError);
    await assert.rejects(receipt(pool, 'wamid.X', 'read', { at: new Date('nope') }), TypeError);
    assert.throws(() => createReceipt(null), TypeError);
  });

  it('works on a pg.Client inside the caller\'s transaction, and bound by createReceipt', async () => {
    const now = await dbNow(pool);
    const pid = providerId();
    const id = await sentMessage(pool, pid, new Date(now.getTime() - MINUTE));
    const client = new Client({ connectionString: databaseURL });
    await client.connect();
    try {
      const apply = createReceipt(client);
      await client.query('BEGIN');
      assert.equal(await apply(pid, 'read'), 'read');
      await client.query('ROLLBACK');
      assert.equal((await messageOf(pool, id)).read_at, null, 'rolled back with the caller\'s transaction');
      assert.equal(await apply(pid, 'delivered'), 'delivered');
      assert.notEqual((await messageOf(pool, id)).delivered_at, null);
    } finally {
      await client.end();
    }
  });
});

// ---------------------------------------------------------------- Baileys

// The real package (a devDependency, pinned in package.json) is ESM:
// import(). Its main entry needs Node.js 20 (its engines; it reads
// globalThis.crypto when loaded), the package supports 18.15: the tests
// load the two modules the main entry re-exports the statuses from, which
// need nothing but protobufjs, and check on Node.js 20 that they are the
// main entry's.
const nodeMajor = Number(process.versions.node.split('.')[0]);

describe('receiptsFromBaileysUpdate', () => {
  let Status; // the real package's proto.WebMessageInfo.Status
  let proto;
  let WAMessageStatus;
  before(async () => {
    ({ proto } = await import('@whiskeysockets/baileys/WAProto/index.js'));
    ({ WAMessageStatus } = await import('@whiskeysockets/baileys/lib/Types/Message.js'));
    Status = proto.WebMessageInfo.Status;
  });

  it('BAILEYS_STATUS is the real package\'s WAMessageStatus (proto.WebMessageInfo.Status)', async () => {
    assert.equal(WAMessageStatus, Status);
    const real = Object.fromEntries(Object.entries(Status).filter(([k]) => /^[A-Z_]+$/.test(k)));
    assert.deepEqual(real, { ...BAILEYS_STATUS }, 'a status renumbered, added or removed upstream');
    if (nodeMajor >= 20) {
      const baileys = await import('@whiskeysockets/baileys');
      assert.equal(baileys.proto, proto, 'the main entry\'s proto');
      assert.equal(baileys.WAMessageStatus, Status, 'the main entry\'s WAMessageStatus');
    }
  });

  it('maps the bot\'s own messages\' statuses, with the real numbers', () => {
    const key = (id, fromMe = true) => ({ remoteJid: '5511999990000@s.whatsapp.net', fromMe, id });
    const t = 1764201600; // Unix seconds, as Baileys' receipts carry them
    const updates = [
      { key: key('3EB0A1'), update: { status: Status.PENDING } },
      { key: key('3EB0A1'), update: { status: Status.SERVER_ACK, messageTimestamp: t } },
      { key: key('3EB0A1'), update: { status: Status.DELIVERY_ACK, messageTimestamp: t + 5 } },
      { key: key('3EB0A1'), update: { status: Status.READ, messageTimestamp: String(t + 60) } },
      { key: key('3EB0A2'), update: { status: Status.PLAYED, messageTimestamp: { toNumber: () => t + 90 } } }, // a Long
      { key: key('3EB0A3'), update: { status: Status.ERROR, messageStubParameters: ['479'] } },
      { key: key('3EB0A4'), update: { status: Status.DELIVERY_ACK, messageTimestamp: 0 } }, // no time: the database's
      { key: key('3EB0A5'), update: { status: 'DELIVERY_ACK' } }, // the enum's name, as protobufjs' toJSON writes it
      { key: key('3EB0B1', false), update: { status: Status.READ } }, // the user's message, read on another device of ours
      { key: key('3EB0B2'), update: { message: { conversation: 'edited' } } }, // an edit: no status
      { key: key('3EB0B3'), update: { status: 42 } }, // a status this package does not know
      { key: key('3EB0B4'), update: { status: null } },
      { key: key(''), update: { status: Status.READ } },
      { key: key(null), update: { status: Status.READ } },
      { key: null, update: { status: Status.READ } },
      null,
    ];
    assert.deepEqual(receiptsFromBaileysUpdate(updates), [
      { providerMessageId: '3EB0A1', status: 'sent', at: new Date(t * 1000) },
      { providerMessageId: '3EB0A1', status: 'delivered', at: new Date((t + 5) * 1000) },
      { providerMessageId: '3EB0A1', status: 'read', at: new Date((t + 60) * 1000) },
      { providerMessageId: '3EB0A2', status: 'read', at: new Date((t + 90) * 1000) },
      { providerMessageId: '3EB0A3', status: 'failed', errorCode: '479' },
      { providerMessageId: '3EB0A4', status: 'delivered' },
      { providerMessageId: '3EB0A5', status: 'delivered' },
    ]);
    assert.deepEqual(receiptsFromBaileysUpdate([]), []);
    assert.deepEqual(receiptsFromBaileysUpdate(undefined), []);
  });

  it('every status of the real enum maps as documented', () => {
    const want = { ERROR: 'failed', PENDING: undefined, SERVER_ACK: 'sent', DELIVERY_ACK: 'delivered', READ: 'read', PLAYED: 'read' };
    for (const [name, status] of Object.entries(want)) {
      const got = receiptsFromBaileysUpdate([{ key: { fromMe: true, id: 'X' }, update: { status: Status[name] } }]);
      assert.deepEqual(got.map((r) => r.status), status ? [status] : [], name);
      assert.ok(!status || RECEIPT_STATUSES.includes(status));
    }
  });

  it('a messages.update event, applied: the message the scheduler sent is delivered, then read', { skip: noDatabase }, async () => {
    const pool = newPool(2);
    try {
      const now = await dbNow(pool);
      const pid = providerId('3EB0'); // Baileys' key.id, the message_id the receiver answered with
      const id = await sentMessage(pool, pid, new Date(now.getTime() - 60 * MINUTE));
      const s = Math.floor(now.getTime() / 1000);
      const event = [
        { key: { remoteJid: '5511999990000@s.whatsapp.net', fromMe: true, id: pid }, update: { status: Status.READ, messageTimestamp: s - 60 } },
        { key: { remoteJid: '5511999990000@s.whatsapp.net', fromMe: true, id: pid }, update: { status: Status.DELIVERY_ACK, messageTimestamp: s - 120 } },
        { key: { remoteJid: '5511999990000@s.whatsapp.net', fromMe: true, id: providerId('3EB0') }, update: { status: Status.READ } }, // the bot's own chat
      ];
      const known = [];
      for (const r of receiptsFromBaileysUpdate(event)) {
        known.push(await receipt(pool, r.providerMessageId, r.status, r));
      }
      assert.deepEqual(known, ['read', 'read', null]);
      const m = await messageOf(pool, id);
      sameTime(m.delivered_at, new Date((s - 120) * 1000));
      sameTime(m.read_at, new Date((s - 60) * 1000));
    } finally {
      await pool.end();
    }
  });
});

// ---------------------------------------------------------------- Meta

// metaBody is a Cloud API webhook body as Meta sends it
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/messages/status/),
// with the statuses given.
function metaBody(statuses, extraChanges = []) {
  return {
    object: 'whatsapp_business_account',
    entry: [{
      id: '102290129340398',
      changes: [{
        value: {
          messaging_product: 'whatsapp',
          metadata: { display_phone_number: '15550783881', phone_number_id: '106540352242922' },
          statuses,
        },
        field: 'messages',
      }, ...extraChanges],
    }],
  };
}

const pricing = { billable: true, pricing_model: 'PMP', category: 'marketing', type: 'regular' };
const metaStatus = (id, status, timestamp, more = {}) => ({ id, status, timestamp: String(timestamp), recipient_id: '15550001234', pricing, ...more });
const failedErrors = (code) => [{
  code,
  title: 'Message undeliverable',
  message: 'Message undeliverable',
  error_data: { details: 'Message could not be delivered' },
}];

describe('receiptsFromMetaWebhook', () => {
  it('reads each statuses[] entry: id, status, timestamp, the error\'s code', () => {
    const t = 1750263773;
    const body = metaBody([
      metaStatus('wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA', 'sent', t),
      metaStatus('wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA', 'delivered', t + 2),
      metaStatus('wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA', 'read', t + 30),
      metaStatus('wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI5RjU3NjgwQjM2RjU0MEY3RTYA', 'failed', t + 3, { errors: failedErrors(131049) }),
    ]);
    body.entry.push({ id: '102290129340399', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', statuses: [
      metaStatus('wamid.SECOND', 'failed', t + 4, { errors: [{ code: '131026', title: 'Message undeliverable' }] }),
    ] } }] });
    const want = [
      { providerMessageId: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA', status: 'sent', at: new Date(t * 1000) },
      { providerMessageId: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA', status: 'delivered', at: new Date((t + 2) * 1000) },
      { providerMessageId: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA', status: 'read', at: new Date((t + 30) * 1000) },
      { providerMessageId: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI5RjU3NjgwQjM2RjU0MEY3RTYA', status: 'failed', at: new Date((t + 3) * 1000), errorCode: '131049' },
      { providerMessageId: 'wamid.SECOND', status: 'failed', at: new Date((t + 4) * 1000), errorCode: '131026' },
    ];
    assert.deepEqual(receiptsFromMetaWebhook(body), want);
    // The raw body, as a string or a Buffer, reads the same.
    const raw = JSON.stringify(body);
    assert.deepEqual(receiptsFromMetaWebhook(raw), want);
    assert.deepEqual(receiptsFromMetaWebhook(Buffer.from(raw)), want);
    // Nothing else of an entry is kept: no recipient, no pricing.
    for (const r of receiptsFromMetaWebhook(body)) {
      assert.deepEqual(Object.keys(r).filter((k) => !['providerMessageId', 'status', 'at', 'errorCode'].includes(k)), []);
    }
  });

  it('ignores other changes, other statuses, entries it cannot use, and bodies that are not Meta\'s', () => {
    const t = 1750263773;
    const messagesOnly = metaBody([], [
      { field: 'messages', value: { messaging_product: 'whatsapp', messages: [{ from: '15550001234', id: 'wamid.IN', type: 'text', text: { body: 'hi' } }],
        contacts: [{ wa_id: '15550001234', profile: { name: 'A' } }] } },
      { field: 'message_template_status_update', value: { event: 'APPROVED', message_template_id: 1 } },
      { field: 'account_update', value: { statuses: [metaStatus('wamid.NOT_A_MESSAGES_FIELD', 'read', t)] } },
    ]);
    assert.deepEqual(receiptsFromMetaWebhook(messagesOnly), []);
    const odd = metaBody([
      metaStatus('wamid.DELETED', 'deleted', t), // not a receipt
      metaStatus('wamid.WARNING', 'warning', t),
      metaStatus('', 'read', t),
      { status: 'read', timestamp: String(t) },
      metaStatus('wamid.BADTIME', 'read', 'yesterday'),
      metaStatus('wamid.MS', 'read', `${t}000.5`),
      { id: 'wamid.NOTIME', status: 'delivered' }, // no timestamp: the database's time
      null,
    ]);
    assert.deepEqual(receiptsFromMetaWebhook(odd), [{ providerMessageId: 'wamid.NOTIME', status: 'delivered' }]);
    for (const body of [null, undefined, {}, { object: 'page', entry: metaBody([metaStatus('wamid.X', 'read', t)]).entry },
      { object: 'whatsapp_business_account' }, { object: 'whatsapp_business_account', entry: [null, { changes: null }] }]) {
      assert.deepEqual(receiptsFromMetaWebhook(body), [], JSON.stringify(body));
    }
    assert.throws(() => receiptsFromMetaWebhook('not json'), SyntaxError);
  });

  it('a forwarded webhook, applied: delivered, then a late failure of another message', { skip: noDatabase }, async () => {
    const pool = newPool(2);
    try {
      const now = await dbNow(pool);
      const s = Math.floor(now.getTime() / 1000);
      const ok = providerId();
      const late = providerId();
      const okId = await sentMessage(pool, ok, new Date(now.getTime() - 60 * MINUTE));
      const lateId = await sentMessage(pool, late, new Date(now.getTime() - 60 * MINUTE));
      const body = metaBody([
        metaStatus(ok, 'delivered', s - 30),
        metaStatus(late, 'sent', s - 50),
        metaStatus(late, 'failed', s - 20, { errors: failedErrors(131026) }),
        metaStatus(providerId(), 'read', s - 10), // a message the scheduler did not send
      ]);
      const known = [];
      for (const r of receiptsFromMetaWebhook(JSON.stringify(body))) {
        known.push(await receipt(pool, r.providerMessageId, r.status, r));
      }
      assert.deepEqual(known, ['delivered', 'accepted', 'failed', null]);
      sameTime((await messageOf(pool, okId)).delivered_at, new Date((s - 30) * 1000));
      const m = await messageOf(pool, lateId);
      assert.equal(m.status, 'failed');
      assert.match(m.error_message, /131026/);
    } finally {
      await pool.end();
    }
  });
});

describe('verifyMetaSignature', () => {
  const appSecret = 'meta-app-secret';
  const raw = JSON.stringify(metaBody([metaStatus('wamid.SIGNED', 'delivered', 1750263773)]));
  const sign = (body, secret = appSecret) => `sha256=${crypto.createHmac('sha256', secret).update(body).digest('hex')}`;

  it('accepts X-Hub-Signature-256 of the raw body under the app secret', () => {
    assert.equal(verifyMetaSignature(appSecret, raw, sign(raw)), true);
    assert.equal(verifyMetaSignature(appSecret, Buffer.from(raw), sign(raw)), true);
    assert.equal(verifyMetaSignature(appSecret, new Uint8Array(Buffer.from(raw)), sign(raw)), true);
  });

  it('refuses a wrong, missing, malformed or tampered signature', () => {
    const good = sign(raw);
    const tampered = raw.replace('delivered', 'read');
    assert.notEqual(tampered, raw);
    const cases = {
      'another secret': [appSecret, raw, sign(raw, 'another-secret')],
      'a tampered body': [appSecret, tampered, good],
      'a body with a byte more': [appSecret, `${raw} `, good],
      'missing': [appSecret, raw, undefined],
      'empty': [appSecret, raw, ''],
      'no prefix': [appSecret, raw, good.slice('sha256='.length)],
      'sha1': [appSecret, raw, `sha1=${crypto.createHmac('sha1', appSecret).update(raw).digest('hex')}`],
      'truncated': [appSecret, raw, good.slice(0, -2)],
      'a stray character': [appSecret, raw, `${good.slice(0, -1)}z`],
      'a flipped digit': [appSecret, raw, good.slice(0, -1) + (good.endsWith('0') ? '1' : '0')],
      'two headers': [appSecret, raw, [good, good]],
      'no secret': ['', raw, sign(raw, '')],
      'a parsed body': [appSecret, JSON.parse(raw), good],
    };
    for (const [name, [secret, body, header]] of Object.entries(cases)) {
      assert.equal(verifyMetaSignature(secret, body, header), false, name);
    }
  });
});
