// fire over the real engagement_fire: every bot move, every refusal with
// its error class, a repeated request key, and agreement with the Go
// state machine's table (ENGAGEMENT_TABLE, given by the Go test).
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { describe, it, before, after } = require('node:test');
const { Client } = require('pg');

const { fire, createFire, engagementError, EngagementError, UnknownTriggerError, NotABotTriggerError,
  UnknownUserError, InvalidMoveError, InstantOutOfRangeError, RequestKeyOfAnotherUserError, SQLSTATE, BOT_TRIGGERS,
  STATES } = require('@engagement-scheduler/bot');
const { databaseURL, noDatabase, newPool, userIn, stateOf, transitionsOf, days } = require('./helpers');

const JOB_TRIGGERS = ['inactivity_14d', 'goodbye_timeout', 'goodbye_undelivered', 'reminder_due'];
const ANSWERS = { goodbye_answer_help: 'help_flow', goodbye_answer_remind_later: 'remind_later', goodbye_answer_dormant: 'dormant' };
const at = new Date('2026-11-24T12:00:00Z');

// refusal checks an error fire threw: its class, SQLSTATE and fields.
function refusal(Class, sqlstate, userId, trigger, extra = {}) {
  return (err) => {
    assert.ok(err instanceof Class, `${err && err.name}: ${err && err.message}; want ${Class.name}`);
    assert.ok(err instanceof EngagementError);
    assert.ok(err instanceof Error);
    assert.equal(err.name, Class.name);
    assert.equal(err.sqlstate, sqlstate);
    assert.equal(err.userId, userId);
    assert.equal(err.trigger, trigger);
    assert.equal(err.cause && err.cause.code, sqlstate, 'cause: the error pg threw');
    assert.match(err.message, /^engagement_fire: /);
    for (const [k, v] of Object.entries(extra)) {
      assert.equal(err[k], v, k);
    }
    return true;
  };
}

describe('fire', { skip: noDatabase }, () => {
  let pool;
  before(() => { pool = newPool(8); });
  after(() => pool.end());

  it('user_message moves every state to active, records the activity and logs the move', async () => {
    for (const from of STATES) {
      const user = await userIn(pool, from, at);
      assert.equal(await fire(pool, user, 'user_message', { at }), 'active', from);
      const row = await stateOf(pool, user);
      assert.equal(row.state, 'active');
      assert.equal(row.last_activity_at.getTime(), at.getTime(), `${from}: last_activity_at`);
      // From active it changes no state and logs nothing; it fires on every message.
      assert.deepEqual(await transitionsOf(pool, user), from === 'active' ? [] : [{ from, to: 'active', trigger: 'user_message' }]);
      if (from === 'goodbye_sent') {
        assert.equal(row.goodbye_expires_at.getTime(), at.getTime(), 'the goodbye is over');
      }
    }
  });

  it('user_message never moves the activity back', async () => {
    const user = await userIn(pool, 'active', at);
    await fire(pool, user, 'user_message', { at });
    await fire(pool, user, 'user_message', { at: new Date(at.getTime() - days(3)) });
    assert.equal((await stateOf(pool, user)).last_activity_at.getTime(), at.getTime());
  });

  it('the three answers to the goodbye move goodbye_sent where the table says, once logged', async () => {
    for (const [trigger, to] of Object.entries(ANSWERS)) {
      const user = await userIn(pool, 'goodbye_sent', at);
      const before = await stateOf(pool, user);
      assert.equal(await fire(pool, user, trigger, { at: at.toISOString() }), to, trigger);
      const row = await stateOf(pool, user);
      assert.equal(row.state, to);
      assert.deepEqual(await transitionsOf(pool, user), [{ from: 'goodbye_sent', to, trigger }]);
      assert.equal(row.goodbye_expires_at.getTime(), at.getTime(), `${trigger}: the goodbye is over`);
      assert.equal(row.last_activity_at.getTime(), Math.max(before.last_activity_at.getTime(), at.getTime()), `${trigger}: the answer is activity`);
      if (trigger === 'goodbye_answer_remind_later') {
        assert.equal(row.remind_at.getTime(), at.getTime() + days(14), 'remind_at = at + 14 days');
      }
    }
  });

  it('without at, the move is the transaction\'s now', async () => {
    const user = await userIn(pool, 'dormant', at);
    const { rows: [{ now }] } = await pool.query('SELECT now()');
    assert.equal(await fire(pool, user, 'user_message'), 'active');
    const row = await stateOf(pool, user);
    assert.ok(Math.abs(row.last_activity_at.getTime() - now.getTime()) < 60000, `last_activity_at ${row.last_activity_at.toISOString()}, now ${now.toISOString()}`);
  });

  it('a goodbye answer from any other state: InvalidMoveError with fromState, nothing changed', async () => {
    for (const from of STATES.filter((s) => s !== 'goodbye_sent')) {
      for (const trigger of Object.keys(ANSWERS)) {
        const user = await userIn(pool, from, at);
        const before = await stateOf(pool, user);
        await assert.rejects(fire(pool, user, trigger, { at }),
          refusal(InvalidMoveError, 'EN004', user, trigger, { fromState: from }));
        await unchanged(pool, user, before);
      }
    }
  });

  it('a job\'s trigger: NotABotTriggerError, nothing changed', async () => {
    const fromWhere = { inactivity_14d: 'active', goodbye_timeout: 'goodbye_sent', goodbye_undelivered: 'goodbye_sent', reminder_due: 'remind_later' };
    for (const trigger of JOB_TRIGGERS) {
      const user = await userIn(pool, fromWhere[trigger], at);
      const before = await stateOf(pool, user);
      await assert.rejects(fire(pool, user, trigger, { at }), refusal(NotABotTriggerError, 'EN002', user, trigger));
      await unchanged(pool, user, before);
    }
  });

  it('an unknown trigger: UnknownTriggerError, nothing changed', async () => {
    for (const trigger of ['wave', '', 'USER_MESSAGE', null]) {
      const user = await userIn(pool, 'goodbye_sent', at);
      const before = await stateOf(pool, user);
      await assert.rejects(fire(pool, user, trigger, { at }), refusal(UnknownTriggerError, 'EN001', user, trigger));
      await unchanged(pool, user, before);
    }
  });

  it('an unknown user: UnknownUserError, nothing logged', async () => {
    const user = crypto.randomUUID();
    await assert.rejects(fire(pool, user, 'user_message', { at }), refusal(UnknownUserError, 'EN003', user, 'user_message'));
    assert.deepEqual(await transitionsOf(pool, user), []);
    assert.equal(await stateOf(pool, user), undefined);
  });

  it('any other error is thrown as is', async () => {
    // pg's own: a user id that is not a UUID.
    await assert.rejects(fire(pool, 'not-a-uuid', 'user_message'), (err) => {
      assert.ok(!(err instanceof EngagementError), `${err.name}: ${err.message}`);
      assert.equal(err.code, '22P02'); // invalid_text_representation
      return true;
    });
    // The very object the client threw.
    const thrown = Object.assign(new Error('connection terminated'), { code: '57P01' });
    const failing = { query: async () => { throw thrown; } };
    await assert.rejects(fire(failing, crypto.randomUUID(), 'user_message'), (err) => err === thrown);
    const notAnError = { query: async () => { throw 'a string'; } }; // eslint-disable-line no-throw-literal
    await assert.rejects(fire(notAnError, crypto.randomUUID(), 'user_message'), (err) => err === 'a string');
    // And what is not a client at all.
    await assert.rejects(fire(undefined, crypto.randomUUID(), 'user_message'), TypeError);
    await assert.rejects(fire({}, crypto.randomUUID(), 'user_message'), TypeError);
    await assert.rejects(fire(pool, crypto.randomUUID(), 'user_message', { at: new Date('nope') }), TypeError);
    assert.throws(() => createFire(null), TypeError);
  });

  it('maps each SQLSTATE of engagement_fire to its class, and nothing else', () => {
    const cases = [[SQLSTATE.UNKNOWN_TRIGGER, UnknownTriggerError], [SQLSTATE.NOT_A_BOT_TRIGGER, NotABotTriggerError],
      [SQLSTATE.UNKNOWN_USER, UnknownUserError], [SQLSTATE.INVALID_MOVE, InvalidMoveError],
      [SQLSTATE.INSTANT_OUT_OF_RANGE, InstantOutOfRangeError], [SQLSTATE.REQUEST_KEY_OF_ANOTHER_USER, RequestKeyOfAnotherUserError]];
    assert.deepEqual(cases.map(([code]) => code), ['EN001', 'EN002', 'EN003', 'EN004', 'EN005', 'EN006']);
    for (const [code, Class] of cases) {
      const pgErr = Object.assign(new Error('engagement_fire: …'), { code, detail: 'help_flow' });
      const err = engagementError(pgErr, 'u', 't');
      assert.ok(err instanceof Class);
      assert.equal(err.sqlstate, code);
      assert.equal(err.cause, pgErr);
      assert.equal(err.fromState, code === 'EN004' ? 'help_flow' : undefined);
    }
    for (const other of [new Error('x'), Object.assign(new Error('x'), { code: 'EN099' }), { code: '23505' }, null, undefined, 'EN001']) {
      assert.equal(engagementError(other), null);
    }
  });

  it('a repeated request key returns the first call\'s state and changes nothing more', async () => {
    const user = await userIn(pool, 'goodbye_sent', at);
    const key = `wa:${crypto.randomUUID()}`;
    assert.equal(await fire(pool, user, 'goodbye_answer_remind_later', { at, requestKey: key }), 'remind_later');
    const first = await stateOf(pool, user);
    // The webhook retried, a day later: same answer, nothing moved, remind_at kept.
    assert.equal(await fire(pool, user, 'goodbye_answer_remind_later', { at: new Date(at.getTime() + days(1)), requestKey: key }), 'remind_later');
    assert.deepEqual(await stateOf(pool, user), first);
    assert.equal((await transitionsOf(pool, user)).length, 1);

    // The user has moved on since: the repeat still changes nothing.
    assert.equal(await fire(pool, user, 'user_message', { at }), 'active');
    const moved = await stateOf(pool, user);
    assert.equal(await fire(pool, user, 'goodbye_answer_remind_later', { at, requestKey: key }), 'remind_later');
    assert.deepEqual(await stateOf(pool, user), moved);
    assert.deepEqual(await transitionsOf(pool, user), [
      { from: 'goodbye_sent', to: 'remind_later', trigger: 'goodbye_answer_remind_later' },
      { from: 'remind_later', to: 'active', trigger: 'user_message' },
    ]);
    const { rows } = await pool.query('SELECT user_id, trigger, state FROM engagement_fire_requests WHERE request_key = $1', [key]);
    assert.deepEqual(rows, [{ user_id: user, trigger: 'goodbye_answer_remind_later', state: 'remind_later' }]);
  });

  it('refuses an instant the bot cannot mean, and changes nothing (issue 42)', async () => {
    const user = await userIn(pool, 'goodbye_sent', at);
    const before = await stateOf(pool, user);
    // Date.now() * 1000 is microseconds taken for milliseconds: the year 58874.
    for (const bad of [new Date(Date.now() * 1000), new Date('9999-12-31T00:00:00Z'), new Date(Date.now() + 10 * 60 * 1000),
      'infinity', '-infinity', new Date('1970-01-01T00:00:00Z')]) {
      await assert.rejects(fire(pool, user, 'goodbye_answer_remind_later', { at: bad }),
        refusal(InstantOutOfRangeError, 'EN005', user, 'goodbye_answer_remind_later'), String(bad));
    }
    assert.deepEqual(await stateOf(pool, user), before);
    assert.deepEqual(await transitionsOf(pool, user), []);
    // Now, as the database's clock and Baileys' messageTimestamp (seconds) give it: a move.
    assert.equal(await fire(pool, user, 'user_message', { at: new Date(Math.floor(Date.now() / 1000) * 1000) }), 'active');
  });

  it('a request key is one user\'s: the same key on another user\'s move is refused (issue 42)', async () => {
    const first = await userIn(pool, 'goodbye_sent', at);
    const second = await userIn(pool, 'goodbye_sent', at);
    const key = `wa:${crypto.randomUUID()}`;
    assert.equal(await fire(pool, first, 'goodbye_answer_help', { at, requestKey: key }), 'help_flow');
    await assert.rejects(fire(pool, second, 'goodbye_answer_dormant', { at, requestKey: key }),
      refusal(RequestKeyOfAnotherUserError, 'EN006', second, 'goodbye_answer_dormant'));
    assert.equal((await stateOf(pool, second)).state, 'goodbye_sent');
    assert.equal(await fire(pool, first, 'goodbye_answer_help', { at, requestKey: key }), 'help_flow');
  });

  it('a refused call does not use up its request key', async () => {
    const user = await userIn(pool, 'active', at);
    const key = `wa:${crypto.randomUUID()}`;
    await assert.rejects(fire(pool, user, 'goodbye_answer_help', { requestKey: key }), InvalidMoveError);
    await pool.query(`UPDATE user_engagement_states SET state = 'goodbye_sent', goodbye_sent_at = $2, goodbye_expires_at = $3 WHERE user_id = $1`,
      [user, at, new Date(at.getTime() + days(2))]);
    assert.equal(await fire(pool, user, 'goodbye_answer_help', { at, requestKey: key }), 'help_flow');
    assert.equal(await fire(pool, user, 'goodbye_answer_help', { at, requestKey: key }), 'help_flow');
    assert.equal((await transitionsOf(pool, user)).length, 1);
  });

  it('without a request key (absent, null or empty), a repeat is a new call', async () => {
    for (const requestKey of [undefined, null, '']) {
      const user = await userIn(pool, 'goodbye_sent', at);
      assert.equal(await fire(pool, user, 'goodbye_answer_help', { at, requestKey }), 'help_flow');
      await assert.rejects(fire(pool, user, 'goodbye_answer_help', { at, requestKey }),
        refusal(InvalidMoveError, 'EN004', user, 'goodbye_answer_help', { fromState: 'help_flow' }));
    }
  });

  it('calls racing with one request key move the user once', async () => {
    const user = await userIn(pool, 'dormant', at);
    const key = `wa:${crypto.randomUUID()}`;
    const states = await Promise.all(Array.from({ length: 8 }, () => fire(pool, user, 'user_message', { at, requestKey: key })));
    assert.deepEqual(states, Array(8).fill('active'));
    assert.deepEqual(await transitionsOf(pool, user), [{ from: 'dormant', to: 'active', trigger: 'user_message' }]);
  });

  it('the README\'s handler: a goodbye answer, or else a message, once per WhatsApp message', async () => {
    // As in README.md: the bot does not know the user's state; an answer
    // to a goodbye that is over is a normal message.
    async function onText(userId, msg, trigger) {
      const options = { at: new Date(Number(msg.messageTimestamp) * 1000), requestKey: msg.key.id };
      if (trigger !== 'user_message') {
        try {
          return await fire(pool, userId, trigger, options);
        } catch (err) {
          if (!(err instanceof InvalidMoveError)) {
            throw err;
          }
        }
      }
      return fire(pool, userId, 'user_message', options);
    }
    const msg = () => ({ key: { id: crypto.randomUUID().toUpperCase().replace(/-/g, '') }, messageTimestamp: at.getTime() / 1000 });
    const waiting = await userIn(pool, 'goodbye_sent', at);
    const over = await userIn(pool, 'active', at);
    const m1 = msg();
    const m2 = msg();
    for (let handled = 0; handled < 2; handled++) { // WhatsApp delivers each twice
      assert.equal(await onText(waiting, m1, 'goodbye_answer_remind_later'), 'remind_later');
      assert.equal(await onText(over, m2, 'goodbye_answer_remind_later'), 'active');
    }
    assert.deepEqual(await transitionsOf(pool, waiting), [{ from: 'goodbye_sent', to: 'remind_later', trigger: 'goodbye_answer_remind_later' }]);
    assert.deepEqual(await transitionsOf(pool, over), []);
    assert.equal((await stateOf(pool, over)).last_activity_at.getTime(), at.getTime(), 'recorded as activity');
  });

  it('works on a pg.Client, inside the caller\'s transaction', async () => {
    const client = new Client({ connectionString: databaseURL });
    await client.connect();
    try {
      const user = await userIn(pool, 'goodbye_sent', at);
      const before = await stateOf(pool, user);
      await client.query('BEGIN');
      assert.equal(await fire(client, user, 'goodbye_answer_dormant', { at }), 'dormant');
      await client.query('ROLLBACK');
      assert.deepEqual(await stateOf(pool, user), before, 'rolled back with the caller\'s transaction');
      assert.deepEqual(await transitionsOf(pool, user), []);

      const fireOn = createFire(client);
      assert.equal(await fireOn(user, 'goodbye_answer_dormant', { at }), 'dormant');
      assert.equal((await stateOf(pool, user)).state, 'dormant');
      await assert.rejects(fireOn(user, 'goodbye_answer_dormant'), InvalidMoveError);
    } finally {
      await client.end();
    }
  });
});

// The Go test passes the state machine's table (statemachine.States,
// Triggers, Transitions) as ENGAGEMENT_TABLE: every state × trigger pair
// through fire does what it says, and the package's constants and types
// name what it names. A bot trigger added to the Go table and the SQL but
// not here fails this test.
const table = process.env.ENGAGEMENT_TABLE ? JSON.parse(process.env.ENGAGEMENT_TABLE) : null;

describe('the Go table', { skip: noDatabase || (!table && 'ENGAGEMENT_TABLE is not set (the Go test sets it)') }, () => {
  let pool;
  before(() => { pool = newPool(8); });
  after(() => pool.end());

  it('every state × trigger pair through fire does what the table says', async () => {
    const next = new Map(table.transitions.map((t) => [`${t.from}/${t.trigger}`, t.to]));
    for (const from of table.states) {
      for (const trigger of table.triggers) {
        const user = await userIn(pool, from, at);
        const before = await stateOf(pool, user);
        const to = next.get(`${from}/${trigger}`);
        const call = fire(pool, user, trigger, { at });
        if (!BOT_TRIGGERS.includes(trigger)) {
          await assert.rejects(call, refusal(NotABotTriggerError, 'EN002', user, trigger), `${from}/${trigger}`);
        } else if (to === undefined) {
          await assert.rejects(call, refusal(InvalidMoveError, 'EN004', user, trigger, { fromState: from }), `${from}/${trigger}`);
        } else {
          assert.equal(await call, to, `${from}/${trigger}`);
          assert.deepEqual(await transitionsOf(pool, user), to === from ? [] : [{ from, to, trigger }], `${from}/${trigger}`);
          continue;
        }
        await unchanged(pool, user, before);
      }
    }
  });

  it('the package names the table\'s states and bot triggers, in its constants and its types', () => {
    assert.deepEqual([...STATES], table.states);
    assert.deepEqual([...BOT_TRIGGERS], table.triggers.filter((t) => BOT_TRIGGERS.includes(t)), 'BOT_TRIGGERS in the table\'s order');
    const jobs = table.triggers.filter((t) => !BOT_TRIGGERS.includes(t));
    assert.deepEqual(jobs, JOB_TRIGGERS);
    // index.d.ts, written by hand, says the same.
    const dts = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8');
    const union = (name) => {
      const m = dts.match(new RegExp(`export type ${name} =([^;]*);`));
      assert.ok(m, `index.d.ts has no type ${name}`);
      return [...m[1].matchAll(/'([a-z_0-9]+)'/g)].map((x) => x[1]);
    };
    assert.deepEqual(union('EngagementState'), table.states);
    assert.deepEqual(union('BotTrigger'), [...BOT_TRIGGERS]);
    assert.deepEqual(union('JobTrigger'), jobs);
  });
});

// unchanged asserts that a refused call left the user as they were.
async function unchanged(pool, user, before) {
  assert.deepEqual(await stateOf(pool, user), before, 'a refused move changed the user');
  assert.deepEqual(await transitionsOf(pool, user), [], 'a refused move was logged');
}
