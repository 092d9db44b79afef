// Runs the reference receiver on its own, for trying it and for the
// project's tests. Environment: DATABASE_URL (the bot's PostgreSQL),
// WEBHOOK_SECRET, PORT (default 8080), SEND_LOG: a file that stands in for
// WhatsApp, one line per send with the message's idempotency key (never its
// JID or text), and REPLAY_LOG: one line per repeat it dropped. A real bot
// passes Baileys' sock.sendMessage instead.
//
// It uses the package as a bot does, by its name (the folder is the
// package: package.json's "exports" lets it refer to itself).
'use strict';

const fs = require('node:fs');
const http = require('node:http');
const { Pool } = require('pg');
const { createReceiver } = require('@engagement-scheduler/bot');

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
pool.on('error', (err) => console.error(`idle database connection: ${err.message}`)); // not a crash
const sendLog = process.env.SEND_LOG;
const replayLog = process.env.REPLAY_LOG;

async function send({ message }) {
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
const handle = createReceiver({ pool, secret: process.env.WEBHOOK_SECRET, send, onReplay, log: (s) => console.error(s) });
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
