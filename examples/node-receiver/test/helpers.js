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

module.exports = { databaseURL, noDatabase, newPool, userIn, stateOf, transitionsOf, days };
