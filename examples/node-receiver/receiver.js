// The receiver's side of the engagement scheduler's webhook, for a Node.js
// WhatsApp bot (Baileys). It implements the contract of docs/receiver.md:
//
//   1. Check X-Engagement-Signature over the raw body, in constant time,
//      before anything else: 401 when it does not match.
//   2. WhatsApp not connected: 503 before claiming, so queue-process treats
//      it as an outage and tries again later, retries unspent.
//   3. Claim the Idempotency-Key in PostgreSQL before sending: one INSERT
//      ... ON CONFLICT DO NOTHING. Only the request that inserted the key
//      sends; a repeat never reaches send().
//   4. Send (unless the request is a probe), mark the key sent, answer 200.
//   5. A repeat of a key already sent: 200 with Idempotent-Replayed: true.
//      A repeat while the first is still sending: 425 (queue-process
//      retries later). A key claimed but never marked sent (the bot died
//      between claim and send): 409, which fails the message for good —
//      it is never sent twice, and an operator finds it (status 'sending').
//
// createReceiver puts them together as one HTTP handler; verifySignature
// and claimDelivery / markDelivered / releaseClaim are the same steps for a
// bot that has its own HTTP framework.
//
// send({jid, text, message}) is the bot's: with Baileys,
//   ({jid, text}) => sock.sendMessage(jid, { text })
// It may throw; the key is then released and the request answered 503, so
// queue-process tries again under the same key. When what it threw is a
// refusal of the whole account (account.js: rate-overlimit, logged out,
// banned, the reach-out timelock), the answer is the contract's account
// answer instead (401/403/409/429 with account_error), and queue-process
// pauses the transport. With account (createAccountState, fed Baileys'
// connection.update and messages.update), a refusal Baileys already
// reported is answered before claiming, without trying to send.
'use strict';

const crypto = require('node:crypto');

const { accountErrorFrom } = require('./account');

// The bot's claims, one row per Idempotency-Key (docs/receiver.md).
const DELIVERIES_TABLE = `CREATE TABLE IF NOT EXISTS bot_webhook_deliveries (
    idempotency_key text PRIMARY KEY,
    status          text NOT NULL CHECK (status IN ('sending', 'sent')),
    message_id      text,
    received_at     timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
)`;

// A claim older than this that was never marked sent is taken for a bot
// that died mid-send.
const STALE_CLAIM_SECONDS = 120;

// verifySignature says whether header (X-Engagement-Signature,
// "sha256=<hex>") is the HMAC-SHA256 of the raw body bytes under secret,
// compared in constant time. Anything missing or malformed is false.
function verifySignature(secret, body, header) {
  if (!secret || typeof header !== 'string' || !header.toLowerCase().startsWith('sha256=')) {
    return false;
  }
  if (typeof body === 'string') {
    body = Buffer.from(body, 'utf8');
  }
  if (!Buffer.isBuffer(body) && !(body instanceof Uint8Array)) {
    return false;
  }
  const hex = header.slice('sha256='.length);
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) { // Buffer.from would skip a stray character
    return false;
  }
  const got = Buffer.from(hex, 'hex');
  const want = crypto.createHmac('sha256', secret).update(body).digest();
  return got.length === want.length && crypto.timingSafeEqual(got, want);
}

// On Supabase, public's default privileges grant every new table to the
// Data API roles anon and authenticated: without this, anyone with the
// project's anon key could read and write the bot's claims. Row level
// security on (no policy: the bot's role owns the table, or is
// service_role, and is not bound by it) and nothing granted to those
// roles, as the scheduler does for its own tables. Each step runs only
// when needed, so a start on a table already closed takes no lock.
const CLOSE_DELIVERIES_TABLE = `DO $$
DECLARE
    r name;
BEGIN
    IF NOT (SELECT relrowsecurity FROM pg_class WHERE oid = 'bot_webhook_deliveries'::regclass) THEN
        ALTER TABLE bot_webhook_deliveries ENABLE ROW LEVEL SECURITY;
    END IF;
    FOR r IN SELECT rolname FROM pg_roles WHERE rolname IN ('anon', 'authenticated') LOOP
        IF has_table_privilege(r, 'bot_webhook_deliveries', 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER') THEN
            EXECUTE format('REVOKE ALL ON TABLE bot_webhook_deliveries FROM %I', r);
        END IF;
    END LOOP;
END
$$`;

// ensureDeliveriesTable creates bot_webhook_deliveries when it is missing,
// closed to Supabase's Data API.
async function ensureDeliveriesTable(pool) {
  await pool.query(DELIVERIES_TABLE);
  await pool.query(CLOSE_DELIVERIES_TABLE);
}

// claimDelivery claims key before sending. {outcome: 'claimed'}: this
// request sends, then calls markDelivered (or releaseClaim if the send
// failed). Otherwise it is a repeat, not to be sent: 'sent' (answer 200
// with Idempotent-Replayed: true; messageId is the first send's),
// 'sending' (the first is still sending: 425) or 'stale' (claimed long ago
// and never marked sent: 409).
async function claimDelivery(pool, key, { staleAfterSeconds = STALE_CLAIM_SECONDS } = {}) {
  const claimed = await pool.query(
    `INSERT INTO bot_webhook_deliveries (idempotency_key, status) VALUES ($1, 'sending')
     ON CONFLICT (idempotency_key) DO NOTHING RETURNING idempotency_key`, [key]);
  if (claimed.rowCount > 0) {
    return { outcome: 'claimed' };
  }
  const { rows } = await pool.query(
    `SELECT status, message_id, now() - received_at > make_interval(secs => $2) AS stale
       FROM bot_webhook_deliveries WHERE idempotency_key = $1`, [key, staleAfterSeconds]);
  const first = rows[0];
  if (first && first.status === 'sent') {
    return { outcome: 'sent', messageId: first.message_id };
  }
  if (first && first.stale) {
    return { outcome: 'stale' };
  }
  // Still sending, or released between the INSERT and the SELECT: either
  // way, queue-process tries again shortly.
  return { outcome: 'sending' };
}

// markDelivered records that the claimed key was sent.
async function markDelivered(pool, key, messageId = null) {
  await pool.query(
    `UPDATE bot_webhook_deliveries SET status = 'sent', sent_at = now(), message_id = $2 WHERE idempotency_key = $1`,
    [key, messageId]);
}

// releaseClaim hands back a claim whose send failed, so that queue-process
// may try again under the same key.
async function releaseClaim(pool, key) {
  await pool.query(`DELETE FROM bot_webhook_deliveries WHERE idempotency_key = $1 AND status = 'sending'`, [key]);
}

function answer(res, status, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

// scrubbed is an error's text fit for a log: without the message's JID,
// its number or its text, nor any other run of 8 digits or more.
function scrubbed(text, message) {
  let s = String(text);
  const jid = typeof message.destination_jid === 'string' ? message.destination_jid : '';
  for (const secret of [jid, jid.split('@')[0], message.text]) {
    if (typeof secret === 'string' && secret.length > 0) {
      s = s.split(secret).join('…');
    }
  }
  return s.replace(/\d{8,}/g, '…');
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) {
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

// createReceiver returns an HTTP request handler, (req, res) => Promise.
// pool is a pg.Pool on the bot's database; connected() says whether
// WhatsApp is connected (default: always); account (createAccountState)
// holds refusals of the whole account Baileys reported; onReplay(key) is
// told of every repeat it dropped; log(line) of every failed send, without
// the message's JID or text. It creates its table at start (and again on
// the next request if that failed).
function createReceiver({ pool, secret, send, connected = () => true, account = null, log = () => {}, onReplay = () => {} } = {}) {
  if (!secret) {
    throw new Error('a webhook secret is required');
  }
  if (!pool || typeof pool.query !== 'function') {
    throw new TypeError('createReceiver: pool must have a query method (a pg.Pool)');
  }
  if (typeof send !== 'function') {
    throw new TypeError('createReceiver: send must be a function');
  }
  let ready = null;
  const tableReady = () => {
    if (!ready) {
      ready = ensureDeliveriesTable(pool).catch((err) => {
        ready = null; // tried again on the next request
        throw err;
      });
    }
    return ready;
  };
  tableReady().catch((err) => log(`creating bot_webhook_deliveries: ${err && err.message}`));

  return async function handle(req, res) {
    const body = await readBody(req);
    if (!verifySignature(secret, body, req.headers['x-engagement-signature'])) {
      return answer(res, 401, { error: 'bad signature' });
    }
    let message;
    try {
      message = JSON.parse(body.toString('utf8'));
    } catch {
      return answer(res, 400, { error: 'body is not JSON' });
    }
    if (message === null || typeof message !== 'object') {
      return answer(res, 400, { error: 'body is not a JSON object' });
    }
    const key = req.headers['idempotency-key'];
    if (!key) {
      return answer(res, 400, { error: 'no Idempotency-Key' });
    }
    const probe = req.headers['x-engagement-probe'] === '1' || message.message_type === 'probe';
    const refusal = !probe && account ? account.answer({ now: new Date() }) : null;
    if (refusal) {
      return answer(res, refusal.status, refusal.body);
    }
    if (!probe && !connected()) {
      return answer(res, 503, { error: 'whatsapp not connected' }, { 'Retry-After': '30' });
    }
    await tableReady();

    const claim = await claimDelivery(pool, key);
    switch (claim.outcome) {
      case 'sent':
        onReplay(key);
        return answer(res, 200, { duplicate: true, message_id: claim.messageId }, { 'Idempotent-Replayed': 'true' });
      case 'stale':
        return answer(res, 409, { error: 'an earlier delivery of this key never finished; not sent again' });
      case 'sending':
        return answer(res, 425, { error: 'this key is being delivered' }, { 'Retry-After': '5' });
    }

    let messageId = null;
    if (!probe) {
      try {
        const sent = await send({ jid: message.destination_jid, text: message.text, message });
        messageId = (sent && sent.key && sent.key.id) || null;
      } catch (err) {
        // Not sent: hand the key back, so queue-process tries again (after
        // its pause, when the whole account was refused).
        await releaseClaim(pool, key);
        const refused = accountErrorFrom(err);
        if (refused) {
          if (account && typeof account.refused === 'function') {
            account.refused(refused);
          }
          log(`send refused for message ${message.id}: account ${refused.body.account_error}, retry after ${refused.body.retry_after_s}s`);
          return answer(res, refused.status, refused.body);
        }
        log(`send failed for message ${message.id}: ${scrubbed(err && err.message, message)}`);
        return answer(res, 503, { error: 'send failed' }, { 'Retry-After': '10' });
      }
    }
    await markDelivered(pool, key, messageId);
    return answer(res, 200, { message_id: messageId });
  };
}

module.exports = {
  createReceiver,
  verifySignature,
  ensureDeliveriesTable,
  claimDelivery,
  markDelivered,
  releaseClaim,
  DELIVERIES_TABLE,
  STALE_CLAIM_SECONDS,
  TABLE: DELIVERIES_TABLE, // its earlier name
};
