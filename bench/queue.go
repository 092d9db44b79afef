package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"golang.org/x/sync/errgroup"

	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// queueRun is one contender's delivery of every message.
type queueRun struct {
	Name      string  `json:"name"`
	Config    string  `json:"config"`
	Messages  int     `json:"messages"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"messages_per_second"`
	MaxRSS    int64   `json:"max_rss_kib,omitempty"` // queue-process only (a process of its own)
	CPU       float64 `json:"cpu_seconds,omitempty"` // queue-process only: its own user + system time
	// ToolCPU is the bench tool's own CPU time during the run: the
	// receiver's, and the contender's when it runs inside the tool (bare,
	// floor, River).
	ToolCPU float64 `json:"tool_cpu_seconds"`
	// ServerCPU is the PostgreSQL cluster's CPU time during the run (its
	// processes' in /proc; 0 when the server is not on this machine, or for
	// bare, which has no database). Others' work on the same cluster
	// counts too: use a cluster of the bench's own.
	ServerCPU float64 `json:"server_cpu_seconds,omitempty"`
	Requests  int64   `json:"webhook_requests"`
	// Connections is how many the receiver accepted during the run: the
	// client's keep-alive pool kept, one per sender; churned, up to one a
	// request.
	Connections int64 `json:"webhook_connections"`
	// WALPerMessage is the WAL the database cluster wrote during the run,
	// per message: what a message costs the database, counted rather than
	// timed (a busy machine changes it only by what others write to the
	// same cluster). Not for bare, which has no database.
	WALPerMessage float64 `json:"wal_bytes_per_message,omitempty"`
	Round         int     `json:"round"`
}

type queueResult struct {
	Machine machine    `json:"machine"`
	Runs    []queueRun `json:"runs"`
}

// webhook is the local bot both contenders call: it reads the body, checks
// the signature and answers 200 at once.
type webhook struct {
	url      string
	requests atomic.Int64
	conns    atomic.Int64 // connections accepted
	srv      *http.Server
}

const webhookSecret = "bench"

func startWebhook() (*webhook, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w := &webhook{url: "http://" + ln.Addr().String() + "/hook"}
	w.srv = &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || !transport.VerifySignature(webhookSecret, body, r.Header.Get("X-Engagement-Signature")) {
			rw.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.requests.Add(1)
		rw.WriteHeader(http.StatusOK)
	}), ConnState: func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			w.conns.Add(1)
		}
	}}
	go w.srv.Serve(ln) //nolint:errcheck // ends with Close
	return w, nil
}

// messageArgs is a River job carrying what a queued message carries.
type messageArgs struct {
	ID             string            `json:"id"`
	UserID         string            `json:"user_id"`
	Type           string            `json:"message_type"`
	Key            string            `json:"message_key"`
	Params         map[string]string `json:"params"`
	Destination    string            `json:"destination"`
	DestinationJID string            `json:"destination_jid"`
	IdempotencyKey string            `json:"idempotency_key"`
}

func (messageArgs) Kind() string { return "engagement_message" }

// messageWorker does per job what queue-process does per message, less
// the ledger: render in the user's locale and POST through the same
// webhook transport (same body, signature and HTTP client settings).
type messageWorker struct {
	river.WorkerDefaults[messageArgs]
	hook    *transport.Webhook
	catalog *sender.Catalog
}

// noopArgs is messageArgs (the same payload) for noopWorker.
type noopArgs struct{ messageArgs }

func (noopArgs) Kind() string { return "engagement_noop" }

// noopWorker does nothing: River's no-op run measures the queue alone.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

func (w *messageWorker) Work(ctx context.Context, job *river.Job[messageArgs]) error {
	a := job.Args
	text, err := w.catalog.Render(a.Key, "pt-BR", a.Params)
	if err != nil {
		return err
	}
	_, err = w.hook.Send(ctx, transport.Delivery{ID: a.ID, UserID: a.UserID, Type: a.Type, Key: a.Key, Params: a.Params,
		Locale: "pt-BR", Text: text, Destination: a.Destination, DestinationJID: a.DestinationJID,
		IdempotencyKey: a.IdempotencyKey, Attempt: job.Attempt})
	return err
}

// riverConfigs are the River set-ups tried; the best is the comparison.
// conns is the pool's size (0: pgxpool's default, 4 on 2 cores); the last
// gets the 8 connections queue-process's pool has.
var riverConfigs = []struct {
	name       string
	maxWorkers int
	cooldown   time.Duration
	conns      int32
}{
	{"MaxWorkers 100, FetchCooldown 100ms (default)", 100, 0, 0},
	{"MaxWorkers 100, FetchCooldown 5ms", 100, 5 * time.Millisecond, 0},
	{"MaxWorkers 64, FetchCooldown 1ms", 64, time.Millisecond, 0},
	{"MaxWorkers 100, FetchCooldown 5ms, 8 connections", 100, 5 * time.Millisecond, 8},
}

// Contenders' names in queueRun.Name.
const (
	nameOurs      = "queue-process"
	nameBare      = "bare"
	nameRiver     = "river"
	nameOursNoop  = "queue-process no-op"
	nameRiverNoop = "river no-op"
	nameFloor     = "floor"
	nameFloorNoop = "floor no-op"
	// The floor's variants (floor.go): with the ledger's row, and on the
	// contract's own tables.
	nameFloorLedger   = "floor+ledger"
	nameFloorContract = "floor on the contract's tables"
)

// runQueue runs rounds of: queue-process at each of workers, the bare
// contender at queue-process's default --workers, the floor in each of its
// configurations, River in each of its, then the three queues again with
// no request (the no-op runs); only the contenders listed in only (all
// when empty).
func runQueue(ctx context.Context, bin string, n, rounds int, workers []int, only string) (queueResult, error) {
	var res queueResult
	hook, err := startWebhook()
	if err != nil {
		return res, err
	}
	defer hook.srv.Close()
	runs := func(contender string) bool {
		return only == "" || slices.Contains(strings.Split(only, ","), contender)
	}
	add := func(r queueRun, round int, err error) error {
		if err != nil {
			return err
		}
		r.Round = round
		res.Runs = append(res.Runs, r)
		fmt.Printf("queue: %s (%s): %.0f messages/s\n", r.Name, r.Config, r.PerSecond)
		return nil
	}
	// rivers runs River in each configuration, or with noop in the tuned
	// ones (the default's no-op run would measure its FetchCooldown of
	// 100 ms, nothing else).
	rivers := func(round int, noop bool) error {
		contender, configs := nameRiver, riverConfigs
		if noop {
			contender, configs = nameRiverNoop, riverConfigs[1:]
		}
		if !runs(contender) {
			return nil
		}
		for _, c := range configs {
			r, err := runRiver(ctx, hook, n, c.maxWorkers, c.cooldown, c.conns, noop)
			r.Config = c.name
			if err := add(r, round, err); err != nil {
				return err
			}
		}
		return nil
	}
	// The bare and floor contenders' deliveries and senders: read and
	// rendered once, the same in every round.
	var ds []transport.Delivery
	var senders int
	deliveries := func() error {
		if ds != nil {
			return nil
		}
		w, err := strconv.Atoi(flagDefault(ctx, bin, "queue-process", "workers"))
		if err != nil || w < 1 {
			return fmt.Errorf("bare, floor: queue-process --help states no default --workers")
		}
		senders = w
		ds, err = bareDeliveries(ctx, n)
		return err
	}
	floors := func(round int, noop bool) error {
		for _, v := range floorVariants {
			contender := v.name
			if noop {
				if v.name != nameFloor {
					continue // the no-op run is the plain floor's only
				}
				contender = nameFloorNoop
			}
			if !runs(contender) {
				continue
			}
			if err := deliveries(); err != nil {
				return err
			}
			for _, c := range floorConfigs {
				r, err := runFloor(ctx, hook, ds, senders, c, v, noop)
				if err := add(r, round, err); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for round := 1; round <= rounds; round++ {
		for _, w := range workers {
			if !runs(nameOurs) {
				break
			}
			r, err := runOurs(ctx, bin, hook, n, w, false)
			if err := add(r, round, err); err != nil {
				return res, err
			}
		}
		if runs(nameBare) {
			if err := deliveries(); err != nil {
				return res, err
			}
			r, err := runBare(ctx, hook, ds, senders)
			if err := add(r, round, err); err != nil {
				return res, err
			}
		}
		if err := floors(round, false); err != nil {
			return res, err
		}
		if err := rivers(round, false); err != nil {
			return res, err
		}
		if runs(nameOursNoop) {
			r, err := runOurs(ctx, bin, hook, n, 0, true)
			if err := add(r, round, err); err != nil {
				return res, err
			}
		}
		if err := floors(round, true); err != nil {
			return res, err
		}
		if err := rivers(round, true); err != nil {
			return res, err
		}
	}
	return res, nil
}

// eligibleUsersSQL selects the seeded users a weekly review is still for
// when it is sent (queue-process re-checks each message against its user
// at claim and cancels the rest): a profile with a WhatsApp JID, a state
// row, not opted out, not goodbye_sent, remind_later or dormant, and
// inside the webhook's reach-out window (28 days since the user's last
// message, measured from the wall clock, not asOf: the seed's users age
// with every day since asOf; 27 days leaves a day's margin).
const eligibleUsersSQL = `
		SELECT p.user_id, p.whatsapp_jid
		  FROM user_profiles p
		  JOIN user_engagement_states s ON s.user_id = p.user_id
		 WHERE p.whatsapp_jid IS NOT NULL AND NOT p.reengagement_opt_out
		   AND s.state NOT IN ('goodbye_sent', 'remind_later', 'dormant')
		   AND s.last_activity_at > now() - interval '27 days'`

// seedQueue generates 1,000 users (seed 1) and queues n due weekly reviews
// spread over those still eligible at send time, then vacuums the queue.
func seedQueue(ctx context.Context, pool *pgxpool.Pool, n int) error {
	if _, err := seed.Generate(ctx, pool, seed.Options{Users: 1000, Seed: 1, AsOf: asOf}); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		       destination_jid, scheduled_for, idempotency_key)
		SELECT p.user_id, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual',
		       p.whatsapp_jid, now() - interval '1 minute', p.user_id::text || ':weekly_review:' || g.i
		  FROM generate_series(1, $1) g(i)
		  JOIN (SELECT e.user_id, e.whatsapp_jid, row_number() OVER (ORDER BY e.user_id) - 1 AS k, count(*) OVER () AS users
		          FROM (`+eligibleUsersSQL+`) e) p ON p.k = g.i % p.users`, n); err != nil {
		return fmt.Errorf("queue %d messages: %w", n, err)
	}
	_, err := pool.Exec(ctx, `VACUUM ANALYZE engagement_message_queue`)
	return err
}

// runOurs queues n messages in a fresh database for 1,000 generated users
// and runs the queue-process binary with pacing off against the webhook,
// with --workers (0: no --workers flag, the binary's default). With noop
// it sends nothing: --transport log, its lines (and the binary's own log)
// written to /dev/null.
func runOurs(ctx context.Context, bin string, hook *webhook, n, workers int, noop bool) (queueRun, error) {
	dbURL, drop, err := pacedDatabase(ctx, n) // a fresh database, n due messages
	if err != nil {
		return queueRun{}, err
	}
	defer drop()
	var sum runSummary
	args := []string{"--transport=webhook", "--webhook-url=" + hook.url, "--webhook-secret=" + webhookSecret,
		"--send-interval=0", "--output=json"}
	contender, config := nameOurs, workersConfig(ctx, bin, workers)
	if noop {
		args = []string{"--transport=log", "--send-interval=0", "--output=json"}
		contender, config = nameOursNoop, config+", --transport log to /dev/null"
	}
	if workers > 0 {
		args = append(args, fmt.Sprint("--workers=", workers))
	}
	count, err := startCounters(ctx, dbURL, hook)
	if err != nil {
		return queueRun{}, err
	}
	p, err := runBinaryStderr(ctx, bin, "queue-process", dbURL, &sum, noop, args...)
	if err != nil {
		return queueRun{}, err
	}
	r := queueRun{Name: contender, Config: config,
		Messages: n, Seconds: p.Seconds, PerSecond: float64(n) / p.Seconds, MaxRSS: p.MaxRSS, CPU: p.CPU}
	if err := count.stop(ctx, &r); err != nil {
		return queueRun{}, err
	}
	if sum.Sent != n {
		return queueRun{}, fmt.Errorf("queue-process sent %d of %d (cancelled %d: %v)", sum.Sent, n, sum.Cancelled, sum.CancelReasons)
	}
	return r, nil
}

// runBare is the limit for this work on this machine: the requests
// queue-process would send for the same messages (ds: bareDeliveries),
// sent from memory through the same transport.Webhook (same JSON body,
// same signature, same HTTP client) to the same receiver, by workers
// goroutines (queue-process's default --workers), with no database at
// all. It times the sends alone, from the first to the last answer.
func runBare(ctx context.Context, hook *webhook, ds []transport.Delivery, workers int) (queueRun, error) {
	wh, err := transport.NewWebhook(transport.WebhookConfig{URL: hook.url, Secret: webhookSecret})
	if err != nil {
		return queueRun{}, err
	}
	before, beforeConns := hook.requests.Load(), hook.conns.Load()
	var next atomic.Int64
	cpu := cpuMeter{}.mark() // no database: the tool's CPU alone
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for range workers {
		g.Go(func() error {
			for i := next.Add(1) - 1; i < int64(len(ds)); i = next.Add(1) - 1 {
				if _, err := wh.Send(gctx, ds[i]); err != nil {
					return fmt.Errorf("bare: %w", err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return queueRun{}, err
	}
	took := time.Since(start)
	toolCPU, _ := cpuMeter{}.since(cpu)
	n := len(ds)
	return queueRun{Name: nameBare, Config: fmt.Sprintf("%d goroutines (queue-process's default --workers), no database", workers),
		Messages: n, Seconds: took.Seconds(), PerSecond: float64(n) / took.Seconds(), ToolCPU: toolCPU,
		Requests: hook.requests.Load() - before, Connections: hook.conns.Load() - beforeConns}, nil
}

// bareDeliveries are the deliveries of n messages queued as runOurs
// queues them, as queue-process's claim reads them (first attempt, the
// profile's locale or the default) and rendered: what bare sends, and the
// floor (its queue holds their ids).
func bareDeliveries(ctx context.Context, n int) ([]transport.Delivery, error) {
	dbURL, drop, err := pacedDatabase(ctx, n) // the same as runOurs's
	if err != nil {
		return nil, err
	}
	defer drop()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
		SELECT q.id::text, q.user_id::text, q.message_type, q.message_key, q.message_params::text,
		       coalesce(nullif(btrim(p.locale), ''), $1), q.destination, q.destination_jid, q.idempotency_key
		  FROM engagement_message_queue q
		  LEFT JOIN user_profiles p ON p.user_id = q.user_id
		 ORDER BY q.scheduled_for, q.id`, sender.DefaultLocale)
	if err != nil {
		return nil, err
	}
	catalog := sender.DefaultCatalog()
	ds := make([]transport.Delivery, 0, n)
	for rows.Next() {
		var d transport.Delivery
		var params string
		if err := rows.Scan(&d.ID, &d.UserID, &d.Type, &d.Key, &params, &d.Locale, &d.Destination, &d.DestinationJID,
			&d.IdempotencyKey); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(params), &d.Params); err != nil {
			return nil, err
		}
		if d.Text, err = catalog.Render(d.Key, d.Locale, d.Params); err != nil {
			return nil, err
		}
		d.Attempt = 1
		ds = append(ds, d)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(ds) != n {
		return nil, fmt.Errorf("bare: %d messages queued, not %d", len(ds), n)
	}
	return ds, nil
}

// freshPool makes a fresh database called name and a pool of conns
// connections to it (0: pgxpool's default); drop closes the pool and drops
// the database.
func freshPool(ctx context.Context, name string, conns int32) (dbURL string, pool *pgxpool.Pool, drop func(), err error) {
	dbURL, err = pgtest.CreateDatabase(ctx, name)
	if err != nil {
		return "", nil, nil, err
	}
	dropDB := func() { pgtest.DropDatabase(context.WithoutCancel(ctx), name) } //nolint:errcheck
	poolConfig, err := pgxpool.ParseConfig(dbURL)
	if err == nil {
		if conns > 0 {
			poolConfig.MaxConns = conns
		}
		pool, err = pgxpool.NewWithConfig(ctx, poolConfig)
	}
	if err != nil {
		dropDB()
		return "", nil, nil, err
	}
	return dbURL, pool, func() { pool.Close(); dropDB() }, nil
}

// runRiver inserts n jobs into a fresh database with River's schema, then
// starts a client and times it from Start until n jobs have completed.
// With noop its worker does nothing (no request).
func runRiver(ctx context.Context, hook *webhook, n, maxWorkers int, cooldown time.Duration, conns int32, noop bool) (queueRun, error) {
	dbURL, pool, drop, err := freshPool(ctx, "engagement_benchtool_river", conns)
	if err != nil {
		return queueRun{}, err
	}
	defer drop()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return queueRun{}, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return queueRun{}, fmt.Errorf("river migrations: %w", err)
	}
	// The transport keeps 64 idle connections (queue-process's most
	// workers); River's 100 would open a connection for most requests
	// (3,371 for 20,000): its client keeps one per worker.
	pooled := http.DefaultTransport.(*http.Transport).Clone()
	pooled.MaxIdleConns, pooled.MaxIdleConnsPerHost = maxWorkers, maxWorkers
	wh, err := transport.NewWebhook(transport.WebhookConfig{URL: hook.url, Secret: webhookSecret, Client: &http.Client{Transport: pooled}})
	if err != nil {
		return queueRun{}, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &messageWorker{hook: wh, catalog: sender.DefaultCatalog()})
	river.AddWorker(workers, noopWorker{})
	cfg := &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers: workers,
		Logger:  nil,
	}
	if cooldown > 0 {
		cfg.FetchCooldown = cooldown
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return queueRun{}, err
	}
	// Insert outside the timing, as the other contender's rows are.
	params := make([]river.InsertManyParams, 0, 5000)
	for i := 0; i < n; i++ {
		var args river.JobArgs = messageArgs{
			ID: fmt.Sprintf("m%d", i), UserID: fmt.Sprintf("u%d", i%1000), Type: "weekly_review",
			Key: "engagement.weekly_review.celebration", Params: map[string]string{"count": "2"}, Destination: "individual",
			DestinationJID: fmt.Sprintf("5511%09d@s.whatsapp.net", i%1000), IdempotencyKey: fmt.Sprintf("u%d:weekly_review:%d", i%1000, i)}
		if noop {
			args = noopArgs{args.(messageArgs)}
		}
		params = append(params, river.InsertManyParams{Args: args})
		if len(params) == cap(params) || i == n-1 {
			if _, err := client.InsertManyFast(ctx, params); err != nil {
				return queueRun{}, fmt.Errorf("river insert: %w", err)
			}
			params = params[:0]
		}
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE river_job`); err != nil {
		return queueRun{}, err
	}
	// A buffer for every event: River drops events that overflow it.
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: n + 1000,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed}})
	defer cancel()
	count, err := startCounters(ctx, dbURL, hook)
	if err != nil {
		return queueRun{}, err
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return queueRun{}, err
	}
	done, timeout := 0, time.After(10*time.Minute)
	for done < n {
		select {
		case e := <-events:
			if e.Kind != river.EventKindJobCompleted {
				return queueRun{}, fmt.Errorf("river job failed: %v", e.Job.Errors)
			}
			done++
		case <-timeout:
			return queueRun{}, fmt.Errorf("river completed %d of %d jobs in 10 minutes", done, n)
		case <-ctx.Done():
			return queueRun{}, ctx.Err()
		}
	}
	took := time.Since(start)
	stopCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	if err := client.Stop(stopCtx); err != nil {
		return queueRun{}, err
	}
	contender := nameRiver
	if noop {
		contender = nameRiverNoop
	}
	r := queueRun{Name: contender, Messages: n, Seconds: took.Seconds(), PerSecond: float64(n) / took.Seconds()}
	// After the stop: River's completer has flushed its last completions.
	if err := count.stop(ctx, &r); err != nil {
		return queueRun{}, err
	}
	return r, nil
}

func (r queueResult) markdown() string {
	var b strings.Builder
	b.WriteString("\n## Queue: queue-process vs bare requests vs the floor vs River, same messages, same webhook, fresh databases\n\n")
	b.WriteString("CPU per message: the client's (queue-process, a process of its own), the tool's (the receiver, and the contender" +
		" when it runs inside the tool: bare, floor, River) and PostgreSQL's (the cluster's processes).\n\n")
	b.WriteString("| round | contender | configuration | messages | time | messages/s | connections | peak RSS | client CPU | " +
		"client µs/msg | tool µs/msg | PostgreSQL µs/msg | WAL/message |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, q := range r.Runs {
		rss, cpu, clientPer, serverPer, wal := "—", "—", "—", "—", "—"
		if q.MaxRSS > 0 {
			rss = fmt.Sprintf("%.0f MiB", mib(q.MaxRSS))
			cpu = fmt.Sprintf("%.2f s", q.CPU)
			clientPer = perMessage(q.CPU, q.Messages)
		}
		if q.ServerCPU > 0 {
			serverPer = perMessage(q.ServerCPU, q.Messages)
		}
		if q.WALPerMessage > 0 {
			wal = fmt.Sprintf("%.0f B", q.WALPerMessage)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %.2f s | %.0f | %d | %s | %s | %s | %s | %s | %s |\n", q.Round, q.Name, q.Config, q.Messages,
			q.Seconds, q.PerSecond, q.Connections, rss, cpu, clientPer, perMessage(q.ToolCPU, q.Messages), serverPer, wal)
	}
	rounds := r.rounds()
	if len(rounds) == 0 {
		return b.String()
	}
	b.WriteString("\nPer round: queue-process with the default flags (qp) against the bare requests, the floor's best and River's best" +
		" (messages/s), and the no-op runs (no request):\n\n")
	b.WriteString("| round | qp | bare | floor | River's best | qp / bare | qp / River's best | floor / bare | qp / floor | " +
		"qp no-op | floor no-op | River no-op, best |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var toBare, toRiver, floorToBare, toFloor []float64
	for _, rd := range rounds {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", rd.round, rate(rd.ours), rate(rd.bare),
			rate(rd.floor), rate(rd.river), ratioText(rd.ours, rd.bare), ratioText(rd.ours, rd.river), ratioText(rd.floor, rd.bare),
			ratioText(rd.ours, rd.floor), rate(rd.oursNoop), rate(rd.floorNoop), rate(rd.riverNoop))
		toBare, toRiver = appendRatio(toBare, rd.ours, rd.bare), appendRatio(toRiver, rd.ours, rd.river)
		floorToBare, toFloor = appendRatio(floorToBare, rd.floor, rd.bare), appendRatio(toFloor, rd.ours, rd.floor)
	}
	b.WriteString("\n")
	for _, m := range []struct {
		what   string
		ratios []float64
	}{
		{"queue-process with the default flags / bare", toBare}, {"queue-process with the default flags / River's best", toRiver},
		{"the floor's best / bare", floorToBare}, {"queue-process with the default flags / the floor's best", toFloor},
	} {
		if len(m.ratios) > 0 {
			fmt.Fprintf(&b, "%s, median over %d rounds: %.2f%s\n", m.what, len(m.ratios), median(m.ratios), targets[m.what])
		}
	}
	return b.String()
}

// targets are issue 59's, by the ratio they are for.
var targets = map[string]string{
	"queue-process with the default flags / bare":         " (target ≥ 0.5)",
	"queue-process with the default flags / River's best": " (target ≥ 1.5)",
}

// appendRatio appends a / b to ratios when both were run.
func appendRatio(ratios []float64, a, b float64) []float64 {
	if a > 0 && b > 0 {
		return append(ratios, a/b)
	}
	return ratios
}

// perMessage is seconds of CPU per message, in µs.
func perMessage(seconds float64, messages int) string {
	return fmt.Sprintf("%.0f", seconds*1e6/float64(messages))
}

// queueRound is one round's figures (messages/s; 0: not run).
type queueRound struct {
	round int
	// ours: the default flags; floor, river: the best configuration.
	ours, bare, floor, river, oursNoop, floorNoop, riverNoop float64
}

// rounds sums up the runs round by round, in order.
func (r queueResult) rounds() []queueRound {
	var out []queueRound
	for _, q := range r.Runs {
		if len(out) == 0 || out[len(out)-1].round != q.Round {
			out = append(out, queueRound{round: q.Round})
		}
		rd := &out[len(out)-1]
		switch q.Name {
		case nameOurs:
			if strings.HasPrefix(q.Config, "no --workers flag") {
				rd.ours = q.PerSecond
			}
		case nameBare:
			rd.bare = q.PerSecond
		case nameRiver:
			rd.river = max(rd.river, q.PerSecond)
		case nameOursNoop:
			rd.oursNoop = q.PerSecond
		case nameRiverNoop:
			rd.riverNoop = max(rd.riverNoop, q.PerSecond)
		case nameFloor:
			rd.floor = max(rd.floor, q.PerSecond)
		case nameFloorNoop:
			rd.floorNoop = max(rd.floorNoop, q.PerSecond)
		}
	}
	return out
}

// rate is v in whole messages/s, or "—" when not run.
func rate(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", v)
}

// ratioText is a / b to two places, or "—" when either was not run.
func ratioText(a, b float64) string {
	if a == 0 || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", ratio(a, b))
}

// median of vs (not empty); vs is sorted in place.
func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// workersConfig labels a run with --workers (0: none given, the binary's
// default, as its --help states it).
func workersConfig(ctx context.Context, bin string, workers int) string {
	def := flagDefault(ctx, bin, "queue-process", "workers")
	switch {
	case workers == 0 && def != "":
		return "no --workers flag (default " + def + ")"
	case workers == 0:
		return "no --workers flag"
	case fmt.Sprint(workers) == def:
		return fmt.Sprintf("--workers %d (default)", workers)
	}
	return fmt.Sprintf("--workers %d", workers)
}
