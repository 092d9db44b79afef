// Helpers of the package's tests (not a test file: package.json's test
// script and the Go test run test/*.test.js only).
'use strict';

const crypto = require('node:crypto');
const { Pool } = require('pg');

// DATABASE_URL is a database migrated by engagementctl migrate up (the Go
// test, ./package_test.go, makes a fresh one); without it the tests that
// need PostgreSQL are skipped.
const databaseURL = process.env.DATABASE_URL;
const noDatabase = databaseURL ? false : 'DATABASE_URL is not set (a database migrated by engagementctl migrate up)';

function newPool(max = 10) {
  const pool = new Pool({ connectionString: databaseURL, max });
  pool.on('error', () => {}); // an idle connection dropped at the end
  return pool;
}

const DAY = 24 * 60 * 60 * 1000;
const days = (n) => n * DAY;

// userIn makes a user in state with the timestamps that state needs: last
// activity 20 days before at; a goodbye sent the day before at, answerable
// until the day after; a reminder due in 30 days.
async function userIn(db, state, at) {
  const id = crypto.randomUUID();
  await db.query(`INSERT INTO user_profiles (user_id, whatsapp_jid) VALUES ($1, $2)`,
    [id, `55119${id.slice(0, 8)}@s.whatsapp.net`]);
  const t = at.getTime();
  const goodbye = state === 'goodbye_sent';
  await db.query(
    `INSERT INTO user_engagement_states (user_id, state, last_activity_at, goodbye_sent_at, goodbye_expires_at, remind_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [id, state, new Date(t - days(20)), goodbye ? new Date(t - days(1)) : null, goodbye ? new Date(t + days(1)) : null,
      state === 'remind_later' ? new Date(t + days(30)) : null]);
  return id;
}

// stateOf is the user's engagement row.
async function stateOf(db, userId) {
  const { rows } = await db.query(
    `SELECT state, last_activity_at, goodbye_sent_at, goodbye_expires_at, remind_at, updated_at
       FROM user_engagement_states WHERE user_id = $1`, [userId]);
  return rows[0];
}

// transitionsOf is the user's log, oldest first.
async function transitionsOf(db, userId) {
  const { rows } = await db.query(
    `SELECT from_state AS "from", to_state AS "to", trigger FROM engagement_state_transitions WHERE user_id = $1 ORDER BY id`,
    [userId]);
  return rows;
}

// sentMessage queues a message to a new active user as queue-process
// leaves one it sent: status sent at sentAt, with the provider's id
// (activity/receipt_test.go's sentMessage). It returns the message's id.
async function sentMessage(db, providerMessageId, sentAt) {
  const user = await userIn(db, 'active', sentAt);
  const { rows } = await db.query(
    `INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
            destination_jid, scheduled_for, idempotency_key, status, sent_at, provider_message_id)
     VALUES ($1, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual',
             '5511999990000@s.whatsapp.net', $2, $3, 'sent', $2, $3)
     RETURNING id::text AS id`, [user, sentAt, providerMessageId]);
  return rows[0].id;
}

// messageOf is what a receipt may change of a message.
async function messageOf(db, id) {
  const { rows } = await db.query(
    `SELECT status, delivered_at, read_at, error_message, in_doubt FROM engagement_message_queue WHERE id = $1`, [id]);
  return rows[0];
}

// profileOnly makes a user with a user_profiles row and no engagement
// state: the consent flag lives on the profile, and a bot may opt out a
// user the scheduler has not seen yet.
async function profileOnly(db) {
  const id = crypto.randomUUID();
  await db.query(`INSERT INTO user_profiles (user_id, whatsapp_jid) VALUES ($1, $2)`,
    [id, `55119${id.slice(0, 8)}@s.whatsapp.net`]);
  return id;
}

// queuedMessage queues a message to user with status (pending, sent, …)
// and returns its id.
async function queuedMessage(db, user, status, scheduledFor) {
  const { rows } = await db.query(
    `INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
            destination_jid, scheduled_for, idempotency_key, status, sent_at)
     VALUES ($1, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual',
             '5511999990000@s.whatsapp.net', $2::timestamptz, $3, $4::text, CASE WHEN $4::text = 'sent' THEN $2::timestamptz END)
     RETURNING id::text AS id`, [user, scheduledFor, `test:${crypto.randomUUID()}`, status]);
  return rows[0].id;
}

// consentOf is the user's flag and consent events, oldest first.
async function consentOf(db, user) {
  const { rows: [p] } = await db.query(`SELECT reengagement_opt_out FROM user_profiles WHERE user_id = $1`, [user]);
  const { rows: events } = await db.query(
    `SELECT opted_out, source, actor, at, superseded FROM engagement_consent_events WHERE user_id = $1 ORDER BY id`, [user]);
  return { optedOut: p.reengagement_opt_out, events };
}

// dbNow is the database's clock, to the millisecond (a JavaScript Date).
async function dbNow(db) {
  const { rows } = await db.query(`SELECT date_trunc('milliseconds', now()) AS now`);
  return rows[0].now;
}

module.exports = { databaseURL, noDatabase, newPool, userIn, stateOf, transitionsOf, days, sentMessage, messageOf, dbNow,
  profileOnly, queuedMessage, consentOf };
