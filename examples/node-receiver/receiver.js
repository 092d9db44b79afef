// A reference receiver for the engagement scheduler's webhook, for a
// Node.js WhatsApp bot (Baileys). It implements the receiver's side of the
// contract (docs/receiver.md):
//
//   1. Check X-Engagement-Signature over the raw body, in constant time,
//      before anything else: 401 when it does not match.
//   2. Claim the Idempotency-Key in PostgreSQL before sending: one INSERT
//      ... ON CONFLICT DO NOTHING. Only the request that inserted the key
//      sends; a repeat never reaches send().
//   3. Send (unless the request is a probe), mark the key sent, answer 200.
//   4. A repeat of a key already sent: 200 with Idempotent-Replayed: true.
//      A repeat while the first is still sending: 425 (queue-process
//      retries later). A key claimed but never marked sent (the bot died
//      between claim and send): 409, which fails the message for good —
//      it is never sent twice, and an operator finds it (status 'sending').
//   5. WhatsApp not connected: 503 before claiming, so queue-process treats
//      it as an outage and tries again later, retries unspent.
//
// send({jid, text, message}) is the bot's: with Baileys,
//   ({jid, text}) => sock.sendMessage(jid, { text })
// It may throw; the key is then released and the request answered 503, so
// queue-process tries again under the same key.
'use strict';

const crypto = require('node:crypto');

const TABLE = `CREATE TABLE IF NOT EXISTS bot_webhook_deliveries (
    idempotency_key text PRIMARY KEY,
    status          text NOT NULL CHECK (status IN ('sending', 'sent')),
    message_id      text,
    received_at     timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
)`;

// A claim older than this that was never marked sent is taken for a bot
// that died mid-send.
const STALE_CLAIM_SECONDS = 120;

function verifySignature(secret, body, header) {
  if (!secret || typeof header !== 'string' || !header.toLowerCase().startsWith('sha256=')) {
    return false;
  }
  const got = Buffer.from(header.slice('sha256='.length), 'hex');
  const want = crypto.createHmac('sha256', secret).update(body).digest();
  return got.length === want.length && crypto.timingSafeEqual(got, want);
}

function answer(res, status, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

// createReceiver returns an HTTP request handler. pool is a pg.Pool;
// connected() says whether WhatsApp is connected (default: always);
// onReplay(key) is told of every repeat it dropped.
function createReceiver({ pool, secret, send, connected = () => true, log = () => {}, onReplay = () => {} }) {
  if (!secret) {
    throw new Error('a webhook secret is required');
  }
  const ready = pool.query(TABLE);

  return async function handle(req, res) {
    const chunks = [];
    for await (const chunk of req) {
      chunks.push(chunk);
    }
    const body = Buffer.concat(chunks);
    if (!verifySignature(secret, body, req.headers['x-engagement-signature'])) {
      return answer(res, 401, { error: 'bad signature' });
    }
    let message;
    try {
      message = JSON.parse(body.toString('utf8'));
    } catch {
      return answer(res, 400, { error: 'body is not JSON' });
    }
    const key = req.headers['idempotency-key'];
    if (!key) {
      return answer(res, 400, { error: 'no Idempotency-Key' });
    }
    const probe = req.headers['x-engagement-probe'] === '1' || message.message_type === 'probe';
    if (!probe && !connected()) {
      return answer(res, 503, { error: 'whatsapp not connected' }, { 'Retry-After': '30' });
    }
    await ready;

    const claimed = await pool.query(
      `INSERT INTO bot_webhook_deliveries (idempotency_key, status) VALUES ($1, 'sending')
       ON CONFLICT (idempotency_key) DO NOTHING RETURNING idempotency_key`, [key]);
    if (claimed.rowCount === 0) {
      const { rows } = await pool.query(
        `SELECT status, message_id, now() - received_at > make_interval(secs => $2) AS stale
           FROM bot_webhook_deliveries WHERE idempotency_key = $1`, [key, STALE_CLAIM_SECONDS]);
      const first = rows[0];
      if (first && first.status === 'sent') {
        onReplay(key);
        return answer(res, 200, { duplicate: true, message_id: first.message_id }, { 'Idempotent-Replayed': 'true' });
      }
      if (first && first.stale) {
        return answer(res, 409, { error: 'an earlier delivery of this key never finished; not sent again' });
      }
      return answer(res, 425, { error: 'this key is being delivered' }, { 'Retry-After': '5' });
    }

    let messageId = null;
    if (!probe) {
      try {
        const sent = await send({ jid: message.destination_jid, text: message.text, message });
        messageId = (sent && sent.key && sent.key.id) || null;
      } catch (err) {
        // Not sent: hand the key back, so queue-process tries again.
        await pool.query(`DELETE FROM bot_webhook_deliveries WHERE idempotency_key = $1 AND status = 'sending'`, [key]);
        log(`send failed for message ${message.id}: ${err && err.message}`);
        return answer(res, 503, { error: 'send failed' }, { 'Retry-After': '10' });
      }
    }
    await pool.query(
      `UPDATE bot_webhook_deliveries SET status = 'sent', sent_at = now(), message_id = $2 WHERE idempotency_key = $1`,
      [key, messageId]);
    return answer(res, 200, { message_id: messageId });
  };
}

module.exports = { createReceiver, verifySignature, TABLE };
