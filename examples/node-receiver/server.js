// Runs the reference receiver on its own, for trying it and for the
// project's tests. Environment: DATABASE_URL (the bot's PostgreSQL),
// WEBHOOK_SECRET, PORT (default 8080), SEND_LOG: a file that stands in for
// WhatsApp, one line per send with the message's idempotency key (never its
// JID or text), and REPLAY_LOG: one line per repeat it dropped. A real bot
// passes Baileys' sock.sendMessage instead, and feeds the account state
// Baileys' events (docs/receiver.md, "Account answers").
//
// SEND_ERROR, for the tests, makes every send throw what Baileys throws
// when the account is refused: a DisconnectReason's name (loggedOut,
// forbidden: the Boom lib/Socket/socket.js closes the socket with) or
// rate-overlimit (assertNodeErrorFree's Boom, data 429). It loads
// @whiskeysockets/baileys, a devDependency.
//
// It uses the package as a bot does, by its name (the folder is the
// package: package.json's "exports" lets it refer to itself).
'use strict';

const fs = require('node:fs');
const http = require('node:http');
const { Pool } = require('pg');
const { createReceiver, createAccountState } = require('@engagement-scheduler/bot');

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
pool.on('error', (err) => console.error(`idle database connection: ${err.message}`)); // not a crash
const sendLog = process.env.SEND_LOG;
const replayLog = process.env.REPLAY_LOG;

// baileysError is the error SEND_ERROR names, built as Baileys builds it.
async function baileysError(name) {
  const { Boom } = require('node:module').createRequire(require.resolve('@whiskeysockets/baileys/package.json'))('@hapi/boom');
  if (name === 'rate-overlimit') {
    const { assertNodeErrorFree } = await import('@whiskeysockets/baileys/lib/WABinary/generic-utils.js');
    try {
      assertNodeErrorFree({ tag: 'iq', attrs: {}, content: [{ tag: 'error', attrs: { code: '429', text: 'rate-overlimit' } }] });
    } catch (err) {
      return err;
    }
  }
  const { DisconnectReason } = await import('@whiskeysockets/baileys/lib/Types/index.js');
  if (!(name in DisconnectReason)) {
    throw new Error(`SEND_ERROR=${name}: not a DisconnectReason nor rate-overlimit`);
  }
  return new Boom('Connection Failure', { statusCode: DisconnectReason[name], data: { reason: String(DisconnectReason[name]) } });
}
const sendError = process.env.SEND_ERROR ? baileysError(process.env.SEND_ERROR) : null;

async function send({ message }) {
  if (sendError) {
    throw await sendError;
  }
  if (sendLog) {
    fs.appendFileSync(sendLog, message.idempotency_key + '\n');
  }
  return { key: { id: 'local-' + message.id } };
}

const onReplay = (key) => {
  if (replayLog) {
    fs.appendFileSync(replayLog, key + '\n');
  }
};
// With Baileys: sock.ev.on('connection.update', account.connectionUpdate)
// and sock.ev.on('messages.update', account.messagesUpdate).
const account = createAccountState();
const handle = createReceiver({ pool, secret: process.env.WEBHOOK_SECRET, send, account, onReplay, log: (s) => console.error(s) });
const server = http.createServer((req, res) => {
  handle(req, res).catch((err) => {
    console.error(`receiver error: ${err.message}`);
    if (!res.headersSent) {
      res.writeHead(500);
    }
    res.end();
  });
});
server.listen(Number(process.env.PORT || 8080), '127.0.0.1', () => {
  console.error(`listening on 127.0.0.1:${server.address().port}`);
});
