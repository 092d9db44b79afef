package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/idempotency"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/redistest"
)

// clock is the PostgreSQL store's movable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 21, 6, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// harness is one store on a fresh backend, with ways to look behind it.
type harness struct {
	store  idempotency.Store
	prefix string // the prefix the store was given
	// expire makes key (checked with ttl) expire now.
	expire func(t *testing.T, key string, ttl time.Duration)
	// stored returns the keys in the backing store, as stored.
	stored func(t *testing.T) []string
	clock  *clock // PostgreSQL only
	pool   *pgxpool.Pool
	client *redis.Client
}

type backend struct {
	name string
	// open returns a store with opts; opts.Prefix is the caller's prefix
	// (Redis puts the test's unique prefix in front of it).
	open func(t *testing.T, opts idempotency.Options) *harness
}

var backends = []backend{
	{"postgres", openPostgres},
	{"redis", openRedis},
}

func openPostgres(t *testing.T, opts idempotency.Options) *harness {
	pool, _ := pgtest.NewPool(t)
	c := newClock()
	opts.Now = c.Now
	h := &harness{store: idempotency.NewPostgres(pool, opts), prefix: opts.Prefix, clock: c, pool: pool}
	h.expire = func(t *testing.T, key string, ttl time.Duration) { c.Advance(ttl) }
	h.stored = func(t *testing.T) []string { return fixture.IdempotencyKeys(t, pool) }
	return h
}

func openRedis(t *testing.T, opts idempotency.Options) *harness {
	client, testPrefix := redistest.New(t)
	opts.Prefix = testPrefix + opts.Prefix
	h := &harness{store: idempotency.NewRedis(client, opts), prefix: opts.Prefix, client: client}
	h.expire = func(t *testing.T, key string, ttl time.Duration) {
		ctx := context.Background()
		marker := opts.Prefix + key
		if err := client.PExpire(ctx, marker, time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			n, err := client.Exists(ctx, marker).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not expire within 2 s", marker)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	h.stored = func(t *testing.T) []string {
		keys, err := client.Keys(context.Background(), testPrefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	return h
}

func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

func check(t *testing.T, s idempotency.Store, key string, ttl time.Duration, want bool) {
	t.Helper()
	got, err := s.Check(context.Background(), key, ttl)
	if err != nil {
		t.Fatalf("Check(%q): %v", key, err)
	}
	if got != want {
		t.Fatalf("Check(%q) = %v, want %v", key, got, want)
	}
}

func TestCheck(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := b.open(t, idempotency.Options{Prefix: "test:"})
		ttl := time.Second
		check(t, h.store, "msg-1", ttl, true)
		check(t, h.store, "msg-1", ttl, false)
		check(t, h.store, "msg-2", ttl, true) // another key is independent
		if h.clock != nil {
			h.clock.Advance(ttl - time.Millisecond)
			check(t, h.store, "msg-1", ttl, false) // still live just before the TTL
			h.clock.Advance(time.Millisecond)
		} else {
			h.expire(t, "msg-1", ttl)
		}
		check(t, h.store, "msg-1", ttl, true) // expired keys are new again
		check(t, h.store, "msg-1", ttl, false)
	})
}

func TestDefaultTTL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := b.open(t, idempotency.Options{Prefix: "ttl:", TTL: time.Hour})
		check(t, h.store, "k", 0, true) // ttl <= 0: Options.TTL
		ctx := context.Background()
		if h.pool != nil {
			if ttl := fixture.IdempotencyKeyTTL(t, h.pool, "ttl:k"); ttl != time.Hour {
				t.Fatalf("expires_at - created_at = %v, want 1h", ttl)
			}
		} else {
			ttl, err := h.client.PTTL(ctx, h.prefix+"k").Result()
			if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
				t.Fatalf("PTTL = %v (%v), want about 1h", ttl, err)
			}
		}

		// Without Options.TTL: DefaultTTL.
		h2 := b.open(t, idempotency.Options{Prefix: "ttl2:"})
		check(t, h2.store, "k", -time.Second, true)
		if h2.pool != nil {
			if ttl := fixture.IdempotencyKeyTTL(t, h2.pool, "ttl2:k"); ttl != idempotency.DefaultTTL {
				t.Fatalf("expires_at - created_at = %v, want %v", ttl, idempotency.DefaultTTL)
			}
		} else {
			ttl, err := h2.client.PTTL(ctx, h2.prefix+"k").Result()
			if err != nil || ttl <= idempotency.DefaultTTL-time.Minute || ttl > idempotency.DefaultTTL {
				t.Fatalf("PTTL = %v (%v), want about %v", ttl, err, idempotency.DefaultTTL)
			}
		}
	})
}

func TestPrefix(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := b.open(t, idempotency.Options{Prefix: "bot:webhook:"})
		ctx := context.Background()
		check(t, h.store, "abc", time.Minute, true)
		if err := h.store.StoreResult(ctx, "abc", []byte(`"ok"`), time.Minute); err != nil {
			t.Fatal(err)
		}
		keys := h.stored(t)
		if len(keys) == 0 {
			t.Fatal("nothing stored")
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, h.prefix) || !strings.HasSuffix(h.prefix, "bot:webhook:") {
				t.Errorf("stored key %q does not start with the prefix %q", k, h.prefix)
			}
		}
		want := map[string][]string{
			"postgres": {"bot:webhook:abc"},
			"redis":    {h.prefix + "abc", h.prefix + "abc:result"},
		}[b.name]
		if fmt.Sprint(sortedCopy(keys)) != fmt.Sprint(want) {
			t.Errorf("stored keys %q, want %q", keys, want)
		}
	})
}

func TestDefaultPrefix(t *testing.T) {
	ctx := context.Background()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pool, _ := pgtest.NewPool(t)
		check(t, idempotency.NewPostgres(pool, idempotency.Options{}), "abc", time.Minute, true)
		if keys := fixture.IdempotencyKeys(t, pool); len(keys) != 1 || keys[0] != "idempotency:abc" {
			t.Fatalf("stored keys %q, want idempotency:abc", keys)
		}
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		client, unique := redistest.New(t)
		key := strings.TrimSuffix(unique, ":") // unique, so it cannot collide with anyone's keys
		t.Cleanup(func() { client.Del(context.Background(), "idempotency:"+key) })
		check(t, idempotency.NewRedis(client, idempotency.Options{}), key, time.Minute, true)
		if n, err := client.Exists(ctx, "idempotency:"+key).Result(); err != nil || n != 1 {
			t.Fatalf("EXISTS idempotency:%s = %d (%v), want 1", key, n, err)
		}
	})
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

func TestConcurrentCheck(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := b.open(t, idempotency.Options{Prefix: "race:"})
		for round := range 5 {
			key := fmt.Sprintf("key-%d", round)
			var (
				wg    sync.WaitGroup
				start = make(chan struct{})
				news  atomic.Int32
				errs  = make(chan error, 20)
			)
			for range 20 {
				wg.Go(func() {
					<-start
					isNew, err := h.store.Check(context.Background(), key, time.Minute)
					if err != nil {
						errs <- err
						return
					}
					if isNew {
						news.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if n := news.Load(); n != 1 {
				t.Fatalf("round %d: %d of 20 concurrent Checks got new, want exactly 1", round, n)
			}
		}
	})
}

func TestConcurrentCheckOfExpiredKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := b.open(t, idempotency.Options{Prefix: "race:"})
		check(t, h.store, "k", time.Second, true)
		h.expire(t, "k", time.Second)
		var news atomic.Int32
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if isNew, err := h.store.Check(context.Background(), "k", time.Second); err != nil {
					t.Error(err)
				} else if isNew {
					news.Add(1)
				}
			})
		}
		wg.Wait()
		if n := news.Load(); n != 1 {
			t.Fatalf("%d of 20 concurrent Checks of an expired key got new, want exactly 1", n)
		}
	})
}

func TestResults(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := b.open(t, idempotency.Options{Prefix: "res:"})
		ctx := context.Background()
		s := h.store
		getResult := func(key string, want string, wantFound bool) {
			t.Helper()
			got, found, err := s.GetResult(ctx, key)
			if err != nil {
				t.Fatalf("GetResult(%q): %v", key, err)
			}
			if found != wantFound || string(got) != want {
				t.Fatalf("GetResult(%q) = %q, %v; want %q, %v", key, got, found, want, wantFound)
			}
		}

		getResult("unknown", "", false)
		check(t, s, "a", time.Hour, true)
		getResult("a", "", false) // checked, no result yet
		if err := s.StoreResult(ctx, "a", []byte(`{"reply":"olá"}`), time.Hour); err != nil {
			t.Fatal(err)
		}
		getResult("a", `{"reply":"olá"}`, true)
		if err := s.StoreResult(ctx, "a", []byte{0, 1, 2, 255}, 0); err != nil {
			t.Fatal(err)
		}
		getResult("a", "\x00\x01\x02\xff", true) // overwritten, binary-safe

		// The result lives as long as the key, not for its own ttl.
		if h.pool != nil {
			if ttl := fixture.IdempotencyKeyTTL(t, h.pool, "res:a"); ttl != time.Hour {
				t.Fatalf("the key's TTL became %v, want it kept at 1h", ttl)
			}
		} else {
			ttl, err := h.client.PTTL(ctx, h.prefix+"a:result").Result()
			if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
				t.Fatalf("PTTL of the result = %v (%v), want the key's remaining ~1h", ttl, err)
			}
		}

		// An unknown key: StoreResult records it for ttl.
		if err := s.StoreResult(ctx, "b", []byte("B"), time.Second); err != nil {
			t.Fatal(err)
		}
		getResult("b", "B", true)
		check(t, s, "b", time.Second, false)

		// An empty result is a result.
		check(t, s, "empty", time.Hour, true)
		if err := s.StoreResult(ctx, "empty", nil, time.Hour); err != nil {
			t.Fatal(err)
		}
		getResult("empty", "", true)

		// Expired: no result; new again, and the old result is gone.
		h.expire(t, "b", time.Second)
		getResult("b", "", false)
		check(t, s, "b", time.Second, true)
		getResult("b", "", false)

		// Forget drops key and result.
		if err := s.(idempotency.Forgetter).Forget(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		getResult("a", "", false)
		check(t, s, "a", time.Hour, true)
	})
}

func TestDeleteExpired(t *testing.T) {
	pool, _ := pgtest.NewPool(t)
	c := newClock()
	s := idempotency.NewPostgres(pool, idempotency.Options{Now: c.Now, Prefix: "gc:"})
	ctx := context.Background()
	for i, ttl := range []time.Duration{time.Hour, 2 * time.Hour, 2 * time.Hour, 3 * time.Hour, 4 * time.Hour} {
		check(t, s, fmt.Sprintf("k%d", i), ttl, true)
	}
	c.Advance(2 * time.Hour) // k0, k1, k2 expired (expires_at <= now)
	n, err := s.DeleteExpired(ctx, c.Now(), 2)
	if err != nil || n != 3 {
		t.Fatalf("DeleteExpired = %d, %v; want 3 (in batches of 2)", n, err)
	}
	if keys := fixture.IdempotencyKeys(t, pool); fmt.Sprint(keys) != "[gc:k3 gc:k4]" {
		t.Fatalf("left %v, want [gc:k3 gc:k4]", keys)
	}
	check(t, s, "k3", time.Hour, false) // live keys stay duplicates
	if n, err := s.DeleteExpired(ctx, c.Now(), 0); err != nil || n != 0 {
		t.Fatalf("second DeleteExpired = %d, %v; want 0", n, err)
	}
}

// unreachable returns stores whose backends do not answer.
func unreachable(t *testing.T, mode idempotency.FailMode, log io.Writer) map[string]idempotency.Store {
	opts := idempotency.Options{FailMode: mode, Logger: zerolog.New(log), Timeout: 3 * time.Second}
	pool, err := pgxpool.New(context.Background(), "postgres://x@127.0.0.1:1/x?connect_timeout=1&sslmode=disable") // not the binaries' pool: a server that is not there
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	return map[string]idempotency.Store{
		"postgres": idempotency.NewPostgres(pool, opts),
		"redis":    idempotency.NewRedis(client, opts),
	}
}

func TestUnreachableFailOpen(t *testing.T) {
	var log bytes.Buffer
	ctx := context.Background()
	const key = "secret-user-key-4711"
	for name, s := range unreachable(t, idempotency.FailOpen, &log) {
		t.Run(name, func(t *testing.T) {
			log.Reset()
			start := time.Now()
			if isNew, err := s.Check(ctx, key, time.Minute); !isNew || err != nil {
				t.Errorf("Check = %v, %v; want true, nil", isNew, err)
			}
			if err := s.StoreResult(ctx, key, []byte("value-42"), time.Minute); err != nil {
				t.Errorf("StoreResult = %v, want nil", err)
			}
			if res, found, err := s.GetResult(ctx, key); res != nil || found || err != nil {
				t.Errorf("GetResult = %q, %v, %v; want nil, false, nil", res, found, err)
			}
			if err := s.(idempotency.Forgetter).Forget(ctx, key); err != nil {
				t.Errorf("Forget = %v, want nil", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
			out := log.String()
			if got := strings.Count(out, `"level":"warn"`); got != 4 {
				t.Errorf("%d warnings, want 4:\n%s", got, out)
			}
			if strings.Contains(out, "secret") || strings.Contains(out, "value-42") {
				t.Errorf("the log reveals the key or the value:\n%s", out)
			}
			if !strings.Contains(out, `"key_sha256"`) || !strings.Contains(out, `"prefix":"idempotency:"`) {
				t.Errorf("the log lacks the key's hash or the prefix:\n%s", out)
			}

			// Wrap runs the handler: the key counts as new.
			runs := 0
			wrapped := idempotency.Wrap(s, func(in string) string { return in }, time.Minute,
				func(ctx context.Context, in string) (int, error) { runs++; return 7, nil })
			if out, dup, err := wrapped(ctx, key); out != 7 || dup || err != nil || runs != 1 {
				t.Errorf("Wrap = %v, %v, %v after %d runs; want 7, false, nil after 1", out, dup, err, runs)
			}
		})
	}
}

func TestUnreachableFailClosed(t *testing.T) {
	var log bytes.Buffer
	ctx := context.Background()
	for name, s := range unreachable(t, idempotency.FailClosed, &log) {
		t.Run(name, func(t *testing.T) {
			if isNew, err := s.Check(ctx, "k", time.Minute); isNew || err == nil || !strings.HasPrefix(err.Error(), "idempotency store: ") {
				t.Errorf("Check = %v, %v; want false and an idempotency store error", isNew, err)
			} else if !idempotency.Unreachable(err) {
				t.Errorf("Unreachable(%v) = false", err)
			}
			if err := s.StoreResult(ctx, "k", []byte("v"), time.Minute); err == nil {
				t.Error("StoreResult: no error")
			}
			if _, found, err := s.GetResult(ctx, "k"); found || err == nil {
				t.Errorf("GetResult = %v, %v; want an error", found, err)
			}
			runs := 0
			wrapped := idempotency.Wrap(s, func(in string) string { return in }, time.Minute,
				func(ctx context.Context, in string) (int, error) { runs++; return 7, nil })
			if _, _, err := wrapped(ctx, "k"); err == nil || runs != 0 {
				t.Errorf("Wrap: err %v after %d runs; want an error and no run", err, runs)
			}
		})
	}
	if log.Len() != 0 {
		t.Errorf("FailClosed logged:\n%s", log.String())
	}
}

func TestCallerContextIsNotFailOpen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := b.open(t, idempotency.Options{FailMode: idempotency.FailOpen})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if isNew, err := h.store.Check(ctx, "k", time.Minute); err == nil {
			t.Fatalf("Check with a cancelled context = %v, nil; want the context's error", isNew)
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("Check with a cancelled context: %v, want context.Canceled", err)
		}
	})
}

type reply struct {
	Text string `json:"text"`
	N    int    `json:"n"`
}

type webhook struct {
	ID   string
	Body string
}

func TestWrap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := b.open(t, idempotency.Options{Prefix: "wrap:"})
		ctx := context.Background()
		var runs atomic.Int32
		fail := map[string]int{"flaky": 1} // fails this many times
		var mu sync.Mutex
		handle := idempotency.Wrap(h.store, func(w webhook) string { return w.ID }, time.Hour,
			func(ctx context.Context, w webhook) (reply, error) {
				n := int(runs.Add(1))
				mu.Lock()
				defer mu.Unlock()
				if fail[w.ID] > 0 {
					fail[w.ID]--
					return reply{}, errors.New("transport down")
				}
				return reply{Text: "re: " + w.Body, N: n}, nil
			})

		out, dup, err := handle(ctx, webhook{"m1", "hello"})
		if err != nil || dup || out != (reply{"re: hello", 1}) {
			t.Fatalf("first = %+v, %v, %v", out, dup, err)
		}
		out, dup, err = handle(ctx, webhook{"m1", "hello again"})
		if err != nil || !dup || out != (reply{"re: hello", 1}) || runs.Load() != 1 {
			t.Fatalf("duplicate = %+v, %v, %v after %d runs; want the first result, duplicate, 1 run", out, dup, err, runs.Load())
		}

		// A failed run forgets its key: the retry runs.
		if _, dup, err := handle(ctx, webhook{"flaky", "x"}); err == nil || err.Error() != "transport down" || dup {
			t.Fatalf("failing run: %v, %v", dup, err)
		}
		out, dup, err = handle(ctx, webhook{"flaky", "x"})
		if err != nil || dup || out.Text != "re: x" || runs.Load() != 3 {
			t.Fatalf("retry = %+v, %v, %v after %d runs", out, dup, err, runs.Load())
		}
		if _, dup, err := handle(ctx, webhook{"flaky", "x"}); err != nil || !dup {
			t.Fatalf("after the successful retry: %v, %v; want a duplicate", dup, err)
		}

		// Empty key.
		if _, _, err := handle(ctx, webhook{}); !errors.Is(err, idempotency.ErrEmptyKey) {
			t.Fatalf("empty key: %v", err)
		}
	})
}

func TestWrapInProgress(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := b.open(t, idempotency.Options{Prefix: "wrap:"})
		ctx := context.Background()
		entered, release := make(chan struct{}), make(chan struct{})
		handle := idempotency.Wrap(h.store, func(id string) string { return id }, time.Hour,
			func(ctx context.Context, id string) (string, error) {
				close(entered)
				<-release
				return "done", nil
			})
		first := make(chan error, 1)
		go func() {
			_, _, err := handle(ctx, "slow")
			first <- err
		}()
		<-entered
		if _, dup, err := handle(ctx, "slow"); !dup || !errors.Is(err, idempotency.ErrInProgress) {
			t.Fatalf("while the first run runs: %v, %v; want duplicate, ErrInProgress", dup, err)
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if out, dup, err := handle(ctx, "slow"); out != "done" || !dup || err != nil {
			t.Fatalf("after the first run: %q, %v, %v", out, dup, err)
		}
	})
}

func TestWrapPanicForgets(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := b.open(t, idempotency.Options{Prefix: "wrap:"})
		panics := true
		handle := idempotency.Wrap(h.store, func(id string) string { return id }, time.Hour,
			func(ctx context.Context, id string) (string, error) {
				if panics {
					panic("boom")
				}
				return "ok", nil
			})
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Fatalf("recovered %v, want the handler's panic", r)
				}
			}()
			handle(context.Background(), "p")
		}()
		panics = false
		if out, dup, err := handle(context.Background(), "p"); out != "ok" || dup || err != nil {
			t.Fatalf("after a panic: %q, %v, %v; want the handler to run again", out, dup, err)
		}
	})
}

func TestParseStore(t *testing.T) {
	pool, _ := pgtest.NewPool(t)
	s, err := idempotency.ParseStore("postgres", pool, idempotency.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*idempotency.Postgres); !ok {
		t.Fatalf("postgres: got %T", s)
	}
	if _, err := idempotency.ParseStore("postgres", nil, idempotency.Options{}); err == nil {
		t.Error("postgres without a pool: no error")
	}

	url, err := redistest.ServerURL(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, prefix := redistest.New(t) // for the cleanup of the keys below
	s, err = idempotency.ParseStore(url, nil, idempotency.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := s.(*idempotency.Redis)
	if !ok {
		t.Fatalf("redis: got %T", s)
	}
	check(t, s, "k", time.Minute, true)
	check(t, s, "k", time.Minute, false)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	for _, spec := range []string{"", "mysql", "http://x", "redis://u:hunter2@127.0.0.1:6379/notanumber"} {
		if _, err := idempotency.ParseStore(spec, pool, idempotency.Options{}); err == nil {
			t.Errorf("ParseStore(%q): no error", spec)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseStore(%q): the error reveals the password: %v", spec, err)
		}
	}
}

func TestCheckSpec(t *testing.T) {
	t.Parallel()
	for spec, ok := range map[string]bool{
		"postgres": true, " postgresql ": true, "redis://127.0.0.1:6379/0": true, "rediss://h:6380": true,
		"mongo://x": false, "": false, "redis://h:notaport": false,
	} {
		if err := idempotency.CheckSpec(spec); (err == nil) != ok {
			t.Errorf("CheckSpec(%q) = %v, want ok=%v", spec, err, ok)
		}
	}
}

// Stats counts every operation and every failure, a failure the store
// failed open on included (queue-process's dedupe check metrics).
func TestStatsCountOperationsAndFailures(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	s, err := idempotency.ParseStore("redis://"+closed, nil, idempotency.Options{FailMode: idempotency.FailOpen, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if isNew, err := s.Check(ctx, "k", time.Minute); err != nil || !isNew {
		t.Fatalf("Check on an unreachable store, failing open: %v, %v; want new, no error", isNew, err)
	}
	if _, _, err := s.GetResult(ctx, "k"); err != nil {
		t.Fatalf("GetResult failing open: %v", err)
	}
	st := s.(interface{ Stats() idempotency.Stats }).Stats()
	if st.Ops != 2 || st.Errors != 2 || st.Duration <= 0 {
		t.Errorf("Stats() = %+v, want 2 operations, 2 failed, some time", st)
	}
}
