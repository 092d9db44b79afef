package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// The chaos suite: one whatsapp-cloud message per user, a fake Cloud API
// that misbehaves at random, three queue-process processes killed with
// SIGKILL at random moments and restarted, until nothing is pending or
// processing. The Cloud API cannot de-duplicate, so every delivery the fake
// counts beyond one per recipient is a message a user got twice.

// chaosBehaviour is what the fake Cloud API does with one request.
type chaosBehaviour int

const (
	chaosOK    chaosBehaviour = iota // delivers, answers 200 with a wamid at once
	chaosError                       // answers 500 (Cloud API code 131000) without delivering
	chaosHang                        // delivers, then never answers (until the client gives up)
	chaosReset                       // delivers, then resets the connection
	chaosSlow                        // delivers, answers 200 after chaosSlowMin to chaosSlowMax
)

// The fake's mix, in percent; the rest is chaosOK.
const (
	chaosErrorPct = 15
	chaosHangPct  = 5
	chaosResetPct = 10
	chaosSlowPct  = 15
	chaosSlowMin  = time.Second
	chaosSlowMax  = 3 * time.Second
	// chaosHangCap ends a hang the client never gave up on.
	chaosHangCap = time.Minute
)

const (
	chaosPhoneID = "109876543210987"
	chaosToken   = "benchTOKEN0123456789"
)

// chaosCase is one chaos run.
type chaosCase struct {
	name     string
	messages int
	flags    []string // besides the transport's
}

var chaosCases = []chaosCase{
	{"unpaced, default --workers", 200, []string{"--send-interval=0"}},
	{"paced 50ms (20/s), --workers 32", 200, []string{"--send-interval=50ms", "--workers=32"}},
}

// chaosRun is what one chaos case measured.
type chaosRun struct {
	Name       string         `json:"name"`
	Flags      string         `json:"flags"` // each process's (plus the whatsapp-* ones)
	Messages   int            `json:"messages"`
	Requests   int            `json:"requests"`
	Behaviours map[string]int `json:"behaviours"` // requests by what the fake did
	Starts     int            `json:"process_starts"`
	Kills      int            `json:"kills"`
	Seconds    float64        `json:"seconds"` // until drained, or the limit
	Drained    bool           `json:"drained"` // nothing pending or processing at the end
	// By recipient, from the fake's counts and the queue rows.
	Twice          int            `json:"delivered_twice_or_more"`
	ExtraDelivered int            `json:"extra_deliveries"` // deliveries beyond the first, over every recipient
	SentNotGot     int            `json:"sent_never_delivered"`
	Stuck          int            `json:"stuck_pending_or_processing"`
	FailedGot      int            `json:"failed_delivered"`       // failed, but the recipient got it (outcome unknown): honest
	FailedNotGot   int            `json:"failed_never_delivered"` // failed, and never delivered: honest
	Statuses       map[string]int `json:"statuses"`
	ExitErrors     int            `json:"unexpected_exits"` // not killed by us, yet not exit 0
	FirstError     string         `json:"first_unexpected_exit,omitempty"`
}

type chaosResult struct {
	Machine machine    `json:"machine"`
	Limit   float64    `json:"limit_seconds"`
	Runs    []chaosRun `json:"runs"`
}

// fakeCloudAPI is the misbehaving WhatsApp Cloud API.
type fakeCloudAPI struct {
	url string
	srv *http.Server

	mu         sync.Mutex
	rng        *rand.Rand
	requests   map[string]int // by recipient
	delivered  map[string]int // by recipient
	behaviours map[string]int
	wamid      int
}

func startFakeCloudAPI(seed uint64) (*fakeCloudAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &fakeCloudAPI{url: "http://" + ln.Addr().String(), rng: rand.New(rand.NewPCG(seed, 14)),
		requests: map[string]int{}, delivered: map[string]int{}, behaviours: map[string]int{}}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve)}
	go f.srv.Serve(ln) //nolint:errcheck // ends with Close
	return f, nil
}

func (f *fakeCloudAPI) close() { f.srv.Close() }

var chaosNames = map[chaosBehaviour]string{chaosOK: "200", chaosError: "500", chaosHang: "hang", chaosReset: "reset", chaosSlow: "slow 200"}

func (f *fakeCloudAPI) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		To string `json:"to"`
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || r.URL.Path != "/"+chaosPhoneID+"/messages" || r.Header.Get("Authorization") != "Bearer "+chaosToken || req.To == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	var b chaosBehaviour
	switch p := f.rng.IntN(100); {
	case p < chaosErrorPct:
		b = chaosError
	case p < chaosErrorPct+chaosHangPct:
		b = chaosHang
	case p < chaosErrorPct+chaosHangPct+chaosResetPct:
		b = chaosReset
	case p < chaosErrorPct+chaosHangPct+chaosResetPct+chaosSlowPct:
		b = chaosSlow
	}
	slow := chaosSlowMin + time.Duration(f.rng.Int64N(int64(chaosSlowMax-chaosSlowMin)))
	f.requests[req.To]++
	f.behaviours[chaosNames[b]]++
	if b != chaosError {
		f.delivered[req.To]++
	}
	f.wamid++
	id := f.wamid
	f.mu.Unlock()

	switch b {
	case chaosError:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"Something went wrong","type":"OAuthException","code":131000,"fbtrace_id":"bench"}}`) //nolint:errcheck
		return
	case chaosHang:
		select {
		case <-r.Context().Done():
		case <-time.After(chaosHangCap):
		}
		return
	case chaosReset:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tcp, ok := conn.(*net.TCPConn); ok {
					tcp.SetLinger(0) //nolint:errcheck // close sends RST
				}
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	case chaosSlow:
		select {
		case <-r.Context().Done():
			return
		case <-time.After(slow):
		}
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"messaging_product":"whatsapp","contacts":[{"input":"%s","wa_id":"%s"}],"messages":[{"id":"wamid.bench%d"}]}`, req.To, req.To, id)
}

func runChaos(ctx context.Context, bin string, limit time.Duration, seed uint64) (chaosResult, error) {
	res := chaosResult{Limit: limit.Seconds()}
	for i, c := range chaosCases {
		r, err := runChaosCase(ctx, bin, c, limit, seed+uint64(i))
		if err != nil {
			return res, fmt.Errorf("chaos %s: %w", c.name, err)
		}
		res.Runs = append(res.Runs, r)
		fmt.Printf("chaos: %s: drained %v in %.0f s, %d kills, %.2f requests/message, %d delivered twice, %d sent never delivered, %d stuck, %d failed (%d of them delivered)\n",
			r.Name, r.Drained, r.Seconds, r.Kills, float64(r.Requests)/float64(r.Messages), r.Twice, r.SentNotGot, r.Stuck,
			r.FailedGot+r.FailedNotGot, r.FailedGot)
	}
	return res, nil
}

func runChaosCase(ctx context.Context, bin string, c chaosCase, limit time.Duration, seed uint64) (chaosRun, error) {
	const name = "engagement_benchtool_chaos"
	run := chaosRun{Name: c.name, Messages: c.messages}
	dbURL, err := pgtest.CreateDatabase(ctx, name)
	if err != nil {
		return run, err
	}
	defer pgtest.DropDatabase(context.WithoutCancel(ctx), name) //nolint:errcheck
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return run, err
	}
	defer pool.Close()
	if err := seedChaos(ctx, pool, c.messages); err != nil {
		return run, err
	}

	dir, err := os.MkdirTemp("", "engagement-bench-chaos-")
	if err != nil {
		return run, err
	}
	defer os.RemoveAll(dir)
	templates := filepath.Join(dir, "templates.json")
	if err := os.WriteFile(templates, []byte(`{"engagement.weekly_review.celebration":
		{"name":"weekly_review_v1","language":{"pt-BR":"pt_BR","en":"en_US"},"params":["count"]}}`), 0o600); err != nil {
		return run, err
	}
	api, err := startFakeCloudAPI(seed)
	if err != nil {
		return run, err
	}
	defer api.close()

	flags := append([]string{"--transport=whatsapp-cloud", "--claim-timeout=5s", "--max-duration=30s",
		"--retry-base=500ms", "--output=json", "--log-level=warn"}, c.flags...)
	run.Flags = strings.Join(flags, " ")
	flags = append(flags, "--whatsapp-base-url="+api.url, "--whatsapp-phone-number-id="+chaosPhoneID,
		"--whatsapp-token="+chaosToken, "--whatsapp-templates="+templates)

	// cctx ends the chaos (no more kills, no more restarts) when the queue
	// is drained or at the limit; the processes then finish on their own
	// (--max-duration), so none is cut short while it might still send.
	// pctx is the hard stop for a process that does not.
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	pctx, pcancel := context.WithTimeout(ctx, limit+90*time.Second)
	defer pcancel()
	rng := rand.New(rand.NewPCG(seed, 41))
	start := time.Now()
	var (
		mu      sync.Mutex
		running = map[*background]bool{}
		wg      sync.WaitGroup
	)
	// The killer: every 0.5–3 s, SIGKILL one running process, at random.
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		for {
			select {
			case <-cctx.Done():
				return
			case <-time.After(500*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond)))):
			}
			mu.Lock()
			var victims []*background
			for p := range running {
				victims = append(victims, p)
			}
			if len(victims) > 0 {
				v := victims[rng.IntN(len(victims))]
				v.kill()
				run.Kills++
			}
			mu.Unlock()
		}
	}()
	// Three slots, each restarting its process until the queue is drained.
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				if left, err := unsettled(cctx, pool); err == nil && left == 0 {
					cancel() // drained: stop the killer and the other slots
					return
				}
				p, err := startBinary(pctx, bin, "queue-process", dbURL, flags...)
				if err != nil {
					return
				}
				mu.Lock()
				running[p] = true
				run.Starts++
				mu.Unlock()
				err = p.wait(nil)
				mu.Lock()
				delete(running, p)
				if err != nil && !p.killed.Load() && pctx.Err() == nil {
					run.ExitErrors++
					if run.FirstError == "" {
						run.FirstError = oneLineErr(err)
					}
				}
				mu.Unlock()
				select {
				case <-cctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
	<-killerDone
	run.Seconds = time.Since(start).Seconds()

	// Judge: the queue rows against the fake's counts.
	rows, err := pool.Query(ctx, `
		SELECT split_part(destination_jid, '@', 1), status
		  FROM engagement_message_queue
		 WHERE idempotency_key LIKE '%:chaos'`)
	if err != nil {
		return run, err
	}
	run.Statuses = map[string]int{}
	api.mu.Lock()
	defer api.mu.Unlock()
	for rows.Next() {
		var to, status string
		if err := rows.Scan(&to, &status); err != nil {
			return run, err
		}
		run.Statuses[status]++
		got := api.delivered[to]
		if got > 1 {
			run.Twice++
			run.ExtraDelivered += got - 1
		}
		switch status {
		case "sent":
			if got == 0 {
				run.SentNotGot++
			}
		case "pending", "processing":
			run.Stuck++
		case "failed":
			if got > 0 {
				run.FailedGot++
			} else {
				run.FailedNotGot++
			}
		}
	}
	if err := rows.Err(); err != nil {
		return run, err
	}
	for _, n := range api.requests {
		run.Requests += n
	}
	run.Behaviours = api.behaviours
	run.Drained = run.Stuck == 0
	return run, nil
}

// unsettled counts the messages still pending or processing.
func unsettled(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `
		SELECT count(*) FROM engagement_message_queue WHERE status IN ('pending', 'processing')`).Scan(&n)
	return n, err
}

// seedChaos generates 1,000 users (seed 1) and queues one due weekly review
// for each of the first n still eligible at send time (eligibleUsersSQL;
// JIDs are unique), to its JID.
func seedChaos(ctx context.Context, pool *pgxpool.Pool, n int) error {
	if _, err := seed.Generate(ctx, pool, seed.Options{Users: 1000, Seed: 1, AsOf: asOf}); err != nil {
		return err
	}
	tag, err := pool.Exec(ctx, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		       destination_jid, scheduled_for, idempotency_key)
		SELECT e.user_id, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual',
		       e.whatsapp_jid, now() - interval '1 minute', e.user_id::text || ':chaos'
		  FROM (`+eligibleUsersSQL+`) e
		 ORDER BY e.user_id
		 LIMIT $1`, n)
	if err != nil {
		return fmt.Errorf("queue %d messages: %w", n, err)
	}
	if int(tag.RowsAffected()) != n {
		return fmt.Errorf("queued %d messages, want %d", tag.RowsAffected(), n)
	}
	return nil
}

func (r chaosResult) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Chaos: whatsapp-cloud against a misbehaving Cloud API, 3 processes, random kill -9\n\n")
	fmt.Fprintf(&b, "The fake answers %d%% 500 (not delivered), %d%% hang until the client gives up, %d%% connection reset after reading, %d%% 200 after %s–%s (those three deliver first), the rest 200 at once. One message per recipient; SIGKILL to a random process every 0.5–3 s, each restarted; until nothing is pending or processing, or %.0f s. Targets: 0 delivered twice, 0 lost (sent but never delivered, or stuck).\n\n",
		chaosErrorPct, chaosHangPct, chaosResetPct, chaosSlowPct, chaosSlowMin, chaosSlowMax, r.Limit)
	b.WriteString("| case | messages | drained | time | starts / kills | requests / message | delivered twice | sent, never delivered | stuck | failed: delivered (outcome unknown) / never delivered |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, q := range r.Runs {
		fmt.Fprintf(&b, "| %s | %d | %v | %.0f s | %d / %d | %.2f | %d (+%d) | %d | %d | %d / %d |\n",
			q.Name, q.Messages, q.Drained, q.Seconds, q.Starts, q.Kills, float64(q.Requests)/float64(max(q.Messages, 1)),
			q.Twice, q.ExtraDelivered, q.SentNotGot, q.Stuck, q.FailedGot, q.FailedNotGot)
	}
	b.WriteString("\nA message that ended `failed` but reached the recipient is honest (its outcome was unknown: a hang or a reset after delivery), not lost; one that ended `failed` and never arrived is an honest failure.\n\nFlags of each process (plus the --whatsapp-* ones):\n\n")
	for _, q := range r.Runs {
		fmt.Fprintf(&b, "- %s: `%s`; requests by behaviour %v; final statuses %v", q.Name, q.Flags, q.Behaviours, q.Statuses)
		if q.ExitErrors > 0 {
			fmt.Fprintf(&b, "; %d unexpected exits, first: %s", q.ExitErrors, q.FirstError)
		}
		b.WriteString("\n")
	}
	return b.String()
}
