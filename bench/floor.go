package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// The floor contender is the least a PostgreSQL-backed queue can do for
// this work and still keep the contract's promises: one request per
// message; a claim committed before the request (a worker killed mid-send
// leaves a claimed row, never a second request); each outcome committed
// once. Its table is as narrow as a queue gets: the id, a status, the
// attempt, the primary key and one partial index on the pending rows; its
// claim is one UPDATE of a batch picked with FOR UPDATE SKIP LOCKED, its
// record one UPDATE … FROM unnest of a batch of outcomes (River's
// completer). It sends the bare contender's requests, from memory, through
// the same transport.Webhook and receiver. What it costs the database per
// message (two committed writes of the message's row, in batches) is about
// the least any queue that keeps the contract can.

// floorSchema is the floor's queue: status 0 pending, 1 claimed, 2 sent,
// 3 failed.
const floorSchema = `
	CREATE TABLE floor_queue (
		id      bigint PRIMARY KEY,
		status  smallint NOT NULL DEFAULT 0,
		attempt smallint NOT NULL DEFAULT 0
	);
	CREATE INDEX floor_queue_pending ON floor_queue (id) WHERE status = 0`

// The floor's variants (issue 59: is 0.5× the bare requests reachable
// with what the contract itself writes?). floor+ledger records each
// outcome's ledger row too, in a table shaped as the contract's
// engagement_processed_messages, upserted on its key as queue-process's
// settle.sql does; the floor on the contract's tables claims and records
// on engagement_message_queue itself (migrated as queue-process's
// database is, its indexes and triggers), pending → processing → sent,
// with the ledger row in engagement_processed_messages: the contract's
// writes, and none of queue-process's checks.
const floorLedgerSchema = floorSchema + `;
	CREATE TABLE floor_ledger (
		message_id          bigint NOT NULL,
		transport           text NOT NULL,
		status              text NOT NULL CHECK (status IN ('processing', 'sent', 'failed')),
		attempts            integer NOT NULL DEFAULT 0,
		first_attempt_at    timestamptz NOT NULL DEFAULT now(),
		last_attempt_at     timestamptz NOT NULL DEFAULT now(),
		provider_message_id text,
		error               text,
		PRIMARY KEY (message_id, transport)
	)`

// floorLedgerRecordSQL is floorRecordSQL with each outcome's ledger row.
const floorLedgerRecordSQL = `
	WITH recorded AS (
		UPDATE floor_queue q SET status = o.status
		  FROM unnest($1::bigint[], $2::smallint[]) o(id, status)
		 WHERE q.id = ANY($1::bigint[]) AND q.id = o.id AND q.status = 1
		RETURNING q.id, q.status)
	INSERT INTO floor_ledger AS l (message_id, transport, status, attempts)
	SELECT id, 'webhook', CASE WHEN status = 2 THEN 'sent' ELSE 'failed' END, 1 FROM recorded
	    ON CONFLICT (message_id, transport) DO UPDATE
	   SET status = EXCLUDED.status, attempts = l.attempts + EXCLUDED.attempts, last_attempt_at = now()`

// floorContractClaimSQL claims up to $1 due messages of the contract's
// queue for holder $2, oldest first, committed. In the pending index's
// order (scheduled_for alone): ordered by id too, every claim sorted
// every pending row, 1 to 2 ms a message.
const floorContractClaimSQL = `
	UPDATE engagement_message_queue SET status = 'processing', claimed_by = $2, claimed_until = now() + interval '5 minutes'
	 WHERE id IN (SELECT id FROM engagement_message_queue
	               WHERE status = 'pending' AND scheduled_for <= now()
	               ORDER BY scheduled_for LIMIT $1 FOR UPDATE SKIP LOCKED)
	RETURNING id::text, 1::smallint`

// floorContractRecordSQL records a batch of outcomes on the contract's
// queue and ledger, each once.
const floorContractRecordSQL = `
	WITH recorded AS (
		UPDATE engagement_message_queue q
		   SET status = CASE WHEN o.status = 2 THEN 'sent' ELSE 'failed' END,
		       sent_at = CASE WHEN o.status = 2 THEN now() END, claimed_by = NULL, claimed_until = NULL
		  FROM unnest($1::uuid[], $2::smallint[]) o(id, status)
		 WHERE q.id = ANY($1::uuid[]) AND q.id = o.id AND q.status = 'processing'
		RETURNING q.id, o.status)
	INSERT INTO engagement_processed_messages AS l (message_id, transport, status, attempts)
	SELECT id, 'webhook', CASE WHEN status = 2 THEN 'sent' ELSE 'failed' END, 1 FROM recorded
	    ON CONFLICT (message_id, transport) DO UPDATE
	   SET status = EXCLUDED.status, attempts = l.attempts + EXCLUDED.attempts, last_attempt_at = now()`

// floorVariant is which floor runs: its own narrow table, with a ledger,
// or the contract's tables.
type floorVariant struct {
	name     string
	contract bool   // the contract's tables, not floor_queue
	schema   string // floor_queue's variants: the tables made
	record   string // floor_queue's variants: the record
}

// floorVariants are the floor's variants, the plain one first.
var floorVariants = []floorVariant{
	{name: nameFloor, schema: floorSchema, record: floorRecordSQL},
	{name: nameFloorLedger, schema: floorLedgerSchema, record: floorLedgerRecordSQL},
	{name: nameFloorContract, contract: true},
}

// floorClaimSQL claims up to $1 pending messages, oldest first, and
// commits (autocommit): the durable claim.
const floorClaimSQL = `
	UPDATE floor_queue SET status = 1, attempt = attempt + 1
	 WHERE id IN (SELECT id FROM floor_queue WHERE status = 0 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
	RETURNING id, attempt`

// floorRecordSQL records a batch of outcomes, each once: a row no longer
// claimed is not counted, and the caller fails on a short count. The id =
// ANY lets the planner find the batch by the primary key whatever the
// statistics say: analyzed while every row was pending, they make "status
// = 1" look like no row, and the join alone was planned as a scan of the
// whole queue (20,000 rows for a batch of 400; queue-process met the same,
// issue 59).
const floorRecordSQL = `
	UPDATE floor_queue q SET status = o.status
	  FROM unnest($1::bigint[], $2::smallint[]) o(id, status)
	 WHERE q.id = ANY($1::bigint[]) AND q.id = o.id AND q.status = 1`

// floorConfig is one way to run the floor: the claim's size, and when the
// outcomes are recorded: by the worker after each claim's sends (every 0),
// or by one completer for all workers, flushing every so often or once it
// holds flushAt outcomes, while the workers claim on.
type floorConfig struct {
	claim   int
	every   time.Duration // 0: each worker records its claim's outcomes itself, then claims again
	flushAt int           // the completer flushes at once when it holds this many
	conns   int32         // the pool's connections
}

func (c floorConfig) String() string {
	s := fmt.Sprintf("claims of %d, outcomes per claim by its worker", c.claim)
	if c.every > 0 {
		s = fmt.Sprintf("claims of %d, outcomes by a completer every %v or %d", c.claim, c.every, c.flushAt)
	}
	return s + fmt.Sprintf(", %d connections", c.conns)
}

// floorConfigs are the floor's set-ups tried; the fastest is the round's
// floor.
var floorConfigs = []floorConfig{
	{claim: 50, conns: 8},
	{claim: 100, conns: 8},
	{claim: 100, every: 10 * time.Millisecond, flushAt: 400, conns: 8},
}

// runFloor queues ds's messages in a fresh database with the variant's
// tables and delivers them as many workers as queue-process's default
// --workers, timed from the first claim to the last outcome committed.
// With noop it sends nothing.
func runFloor(ctx context.Context, hook *webhook, ds []transport.Delivery, workers int, c floorConfig, v floorVariant,
	noop bool) (queueRun, error) {
	wh, err := transport.NewWebhook(transport.WebhookConfig{URL: hook.url, Secret: webhookSecret})
	if err != nil {
		return queueRun{}, err
	}
	sendOne := func(ctx context.Context, i int, attempt int16) error {
		if noop {
			return nil
		}
		d := ds[i]
		d.Attempt = int(attempt)
		_, err := wh.Send(ctx, d)
		return err
	}
	var (
		dbURL    string
		pool     *pgxpool.Pool
		drop     func()
		deliver  func() (int64, error)
		recorded int64
	)
	if v.contract {
		// The contract's queue, seeded as queue-process's; its messages
		// are ds's in the same order (bareDeliveries reads them so).
		if dbURL, drop, err = pacedDatabase(ctx, len(ds)); err != nil {
			return queueRun{}, err
		}
		defer drop()
		if pool, err = poolOf(ctx, dbURL, c.conns); err != nil {
			return queueRun{}, err
		}
		defer pool.Close()
		order, err := contractOrder(ctx, pool)
		if err != nil {
			return queueRun{}, err
		}
		q := floorQueue[string]{claim: floorContractClaimSQL, claimArgs: []any{"floor"}, record: floorContractRecordSQL,
			send: func(ctx context.Context, id string, attempt int16) error { return sendOne(ctx, order[id], attempt) }}
		deliver = func() (int64, error) { return deliverFloor(ctx, pool, workers, c, q) }
	} else {
		if dbURL, pool, drop, err = freshPool(ctx, "engagement_benchtool_floor", c.conns); err != nil {
			return queueRun{}, err
		}
		defer drop()
		if err := seedFloor(ctx, pool, v.schema, len(ds)); err != nil {
			return queueRun{}, err
		}
		q := floorQueue[int64]{claim: floorClaimSQL, record: v.record,
			send: func(ctx context.Context, id int64, attempt int16) error { return sendOne(ctx, int(id-1), attempt) }}
		deliver = func() (int64, error) { return deliverFloor(ctx, pool, workers, c, q) }
	}
	if err := openAll(ctx, pool, c.conns); err != nil {
		return queueRun{}, err
	}
	count, err := startCounters(ctx, dbURL, hook)
	if err != nil {
		return queueRun{}, err
	}
	start := time.Now()
	recorded, err = deliver()
	took := time.Since(start)
	if err != nil {
		return queueRun{}, err
	}
	contender := v.name
	if noop {
		contender += " no-op"
	}
	r := queueRun{Name: contender, Config: fmt.Sprintf("%d workers, %v", workers, c), Messages: len(ds), Seconds: took.Seconds(),
		PerSecond: float64(len(ds)) / took.Seconds()}
	if err := count.stop(ctx, &r); err != nil {
		return queueRun{}, err
	}
	if recorded != int64(len(ds)) {
		return queueRun{}, fmt.Errorf("%s: %d outcomes recorded of %d", v.name, recorded, len(ds))
	}
	return r, nil
}

// poolOf opens a pool of conns connections to dbURL.
func poolOf(ctx context.Context, dbURL string, conns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = conns
	return pgxpool.NewWithConfig(ctx, cfg)
}

// contractOrder maps each queued message's id to its place in the queue's
// order (bareDeliveries's: due time, then id).
func contractOrder(ctx context.Context, pool *pgxpool.Pool) (map[string]int, error) {
	rows, err := pool.Query(ctx, `SELECT id::text FROM engagement_message_queue ORDER BY scheduled_for, id`)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	order := make(map[string]int, len(ids))
	for i, id := range ids {
		order[id] = i
	}
	return order, nil
}

// openAll opens the pool's conns connections before the clock starts (a
// process's start is not timed either).
func openAll(ctx context.Context, pool *pgxpool.Pool, conns int32) error {
	held := make([]*pgxpool.Conn, 0, conns)
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		held = append(held, c)
	}
	return nil
}

// seedFloor makes the floor's table, queues n messages in it (ids 1 to n:
// message id stands for ds[id-1], whose own id is queue-process's uuid)
// and vacuums it, as the other contenders' queues are.
func seedFloor(ctx context.Context, pool *pgxpool.Pool, schema string, n int) error {
	if _, err := pool.Exec(ctx, schema); err != nil {
		return fmt.Errorf("floor: create its queue: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO floor_queue (id) SELECT generate_series(1, $1::bigint)`, n); err != nil {
		return fmt.Errorf("floor: queue %d messages: %w", n, err)
	}
	_, err := pool.Exec(ctx, `VACUUM ANALYZE floor_queue`)
	return err
}

// floorQueue is a floor's queue: its claim (of up to $1 messages, then
// claimArgs), its record (of $1 ids' $2 outcomes) and a message's send.
type floorQueue[ID int64 | string] struct {
	claim     string
	claimArgs []any
	record    string
	send      func(ctx context.Context, id ID, attempt int16) error
}

// deliverFloor runs the workers until no message is pending and every
// outcome is recorded, and returns how many were.
func deliverFloor[ID int64 | string](ctx context.Context, pool *pgxpool.Pool, workers int, c floorConfig, q floorQueue[ID]) (int64, error) {
	var recorded atomic.Int64
	record := func(ctx context.Context, ids []ID, statuses []int16) error {
		tag, err := pool.Exec(ctx, q.record, ids, statuses)
		if err != nil {
			return fmt.Errorf("floor: record %d outcomes: %w", len(ids), err)
		}
		if tag.RowsAffected() != int64(len(ids)) {
			return fmt.Errorf("floor: %d of %d outcomes recorded", tag.RowsAffected(), len(ids))
		}
		recorded.Add(tag.RowsAffected())
		return nil
	}
	done := make(chan outcomes[ID], workers)
	g, gctx := errgroup.WithContext(ctx)
	cg, cctx := errgroup.WithContext(ctx) // the completer outlives the workers
	if c.every > 0 {
		cg.Go(func() error { return complete(cctx, done, c, record) })
	}
	for range workers {
		g.Go(func() error {
			for {
				out, err := claimAndSend(gctx, pool, c.claim, q)
				if err != nil || len(out.ids) == 0 {
					return err
				}
				if c.every == 0 {
					if err := record(gctx, out.ids, out.statuses); err != nil {
						return err
					}
					continue
				}
				select {
				case done <- out:
				case <-gctx.Done():
					return gctx.Err()
				case <-cctx.Done():
					return cctx.Err()
				}
			}
		})
	}
	err := g.Wait()
	close(done)
	if cerr := cg.Wait(); err == nil {
		err = cerr
	}
	return recorded.Load(), err
}

// outcomes are a claim's: its ids and their statuses (2 sent, 3 failed).
type outcomes[ID int64 | string] struct {
	ids      []ID
	statuses []int16
}

// claimAndSend claims up to size messages (committed) and sends each.
func claimAndSend[ID int64 | string](ctx context.Context, pool *pgxpool.Pool, size int, q floorQueue[ID]) (outcomes[ID], error) {
	rows, err := pool.Query(ctx, q.claim, append([]any{size}, q.claimArgs...)...)
	if err != nil {
		return outcomes[ID]{}, fmt.Errorf("floor: claim: %w", err)
	}
	var out outcomes[ID]
	var attempts []int16
	for rows.Next() {
		var id ID
		var attempt int16
		if err := rows.Scan(&id, &attempt); err != nil {
			rows.Close()
			return outcomes[ID]{}, err
		}
		out.ids, attempts = append(out.ids, id), append(attempts, attempt)
	}
	if err := rows.Err(); err != nil {
		return outcomes[ID]{}, fmt.Errorf("floor: claim: %w", err)
	}
	for i, id := range out.ids {
		if err := q.send(ctx, id, attempts[i]); err != nil {
			return outcomes[ID]{}, fmt.Errorf("floor: send: %w", err) // as bare's: the receiver answers 200, an error ends the run
		}
		out.statuses = append(out.statuses, 2)
	}
	return out, nil
}

// complete is the completer: it gathers the workers' outcomes and records
// them every c.every, or at once when it holds c.flushAt, and the rest
// when the workers are done.
func complete[ID int64 | string](ctx context.Context, done <-chan outcomes[ID], c floorConfig,
	record func(context.Context, []ID, []int16) error) error {
	var pending outcomes[ID]
	flush := func() error {
		if len(pending.ids) == 0 {
			return nil
		}
		err := record(ctx, pending.ids, pending.statuses)
		pending = outcomes[ID]{}
		return err
	}
	tick := time.NewTicker(c.every)
	defer tick.Stop()
	for {
		select {
		case out, ok := <-done:
			if !ok {
				return flush()
			}
			pending.ids, pending.statuses = append(pending.ids, out.ids...), append(pending.statuses, out.statuses...)
			if len(pending.ids) < c.flushAt {
				continue
			}
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := flush(); err != nil {
			return err
		}
	}
}
