package console

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/singleflight"
)

// The overview, queue, verify and forecast pages read every user, every
// message or the whole log: at a million users that is seconds of work, too
// slow to make an operator wait for on every load, and pointless to repeat
// for each one of them. Their data is a snapshot, read from the replica
// when there is one (Config.Replica; the forecast, a dry run of the daily
// job, from the primary): computed once however many requests
// ask at once, refreshed in the background while the page is being looked
// at (Console.Refresh), and shown with when it was computed.
//
// No request waits for a snapshot but the very first of a page. A snapshot
// older than MaxAge, or from before an action that changed the queue, is
// still served at once, marked stale ("as of 14:02, refreshing…"), while a
// new one is computed in the background; the next load shows that one.

// snapshot is a page's data, a T, and when it was computed.
type snapshot[T any] struct {
	data  T
	taken time.Time
	took  time.Duration
	// replica is the state of the replica the data was read from; nil when
	// it was read from the primary.
	replica *replicaStatus
	// stale marks a snapshot served while a newer one is computed: it is
	// older than MaxAge, or an action has changed what it shows.
	stale bool
	// failed is when the last refresh after it failed (zero if none did).
	failed time.Time
}

// refresher is a page's snapshot cache, whatever its page's type: what
// the background refresh and the actions do with it.
type refresher interface {
	due() bool
	// refreshed computes a new snapshot and says how long that took.
	refreshed(ctx context.Context) (time.Duration, error)
	invalidate()
	wait(ctx context.Context) error
}

// cache holds one page's latest snapshot.
type cache[T any] struct {
	name string
	// load computes the page's data, and the state of the replica it read
	// it from (nil: the primary).
	load   func(ctx context.Context) (T, *replicaStatus, error)
	maxAge time.Duration
	// idle is how long after its last view a page stops being refreshed.
	idle time.Duration
	now  func() time.Time
	log  zerolog.Logger

	mu     sync.Mutex
	viewed time.Time // the last get; the zero time until then
	cur    *snapshot[T]
	gen    int  // bumped by invalidate
	dirty  bool // an action changed what cur shows
	// refreshing is open while a background refresh (get's, invalidate's)
	// runs, one at a time, and closed when it ends; nil when none runs.
	refreshing chan struct{}
	failed     time.Time
	group      singleflight.Group
}

// get returns the page's snapshot: the current one at once, marked stale
// and refreshed in the background when it is older than maxAge or an
// action changed what it shows; the first one is computed while the caller
// waits (concurrent callers share one computation).
//
// view says whether the get is a view of the page: another page reading
// it (the overview's summary reads the queue's and verify's snapshots)
// does not keep it refreshed.
func (c *cache[T]) get(ctx context.Context, view bool) (*snapshot[T], error) {
	now := c.now()
	c.mu.Lock()
	if view {
		c.viewed = now
	}
	cur := c.cur
	if cur == nil {
		c.mu.Unlock()
		return c.refresh(ctx)
	}
	if !c.dirty && now.Sub(cur.taken) < c.maxAge {
		c.mu.Unlock()
		return cur, nil
	}
	start := c.refreshing == nil
	if start {
		c.refreshing = make(chan struct{})
	}
	stale := *cur
	stale.stale, stale.failed = true, c.failed
	c.mu.Unlock()
	if start {
		go c.background(context.WithoutCancel(ctx))
	}
	return &stale, nil
}

// peek is get for a reader that must not wait: the current snapshot as get
// serves it when there is one, and otherwise nil, with the first one
// computed in the background (the overview's summary reads the queue and
// verify snapshots this way: at a million users, waiting for verify's
// first one made a fresh console's overview take minutes). It is no view
// of the page; a nil cache (a console without the page) has none.
func (c *cache[T]) peek(ctx context.Context) (*snapshot[T], error) {
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	if c.cur != nil {
		c.mu.Unlock()
		return c.get(ctx, false) // at once: there is a snapshot
	}
	start := c.refreshing == nil
	if start {
		c.refreshing = make(chan struct{})
	}
	c.mu.Unlock()
	if start {
		go c.background(context.WithoutCancel(ctx))
	}
	return nil, nil
}

// due reports whether Refresh should recompute the page: it has no
// snapshot yet (the first round computes every page), or it was viewed
// within idle. A page nobody looks at puts no load on the database.
func (c *cache[T]) due() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur == nil || (!c.viewed.IsZero() && c.now().Sub(c.viewed) < c.idle)
}

// background refreshes the snapshot, once more if an action came while
// the computation it joined had already begun, and logs a failure.
func (c *cache[T]) background(ctx context.Context) {
	defer func() {
		c.mu.Lock()
		close(c.refreshing)
		c.refreshing = nil
		c.mu.Unlock()
	}()
	for range 2 {
		if _, err := c.refresh(ctx); err != nil {
			c.log.Warn().Err(err).Str("page", c.name).Msg("refreshing a page's snapshot failed")
			return
		}
		c.mu.Lock()
		dirty := c.dirty
		c.mu.Unlock()
		if !dirty {
			return
		}
	}
}

// refreshed is refresh for Refresh: how long the computation took.
func (c *cache[T]) refreshed(ctx context.Context) (time.Duration, error) {
	snap, err := c.refresh(ctx)
	if err != nil {
		return 0, err
	}
	return snap.took, nil
}

// refresh computes a new snapshot (or joins the one under way).
func (c *cache[T]) refresh(ctx context.Context) (*snapshot[T], error) {
	_, err, _ := c.group.Do(c.name, func() (any, error) {
		c.mu.Lock()
		gen := c.gen
		c.mu.Unlock()
		start := c.now()
		// Not the request's context: a computation others wait for must
		// not end because its first asker went away.
		data, replica, err := c.load(context.WithoutCancel(ctx))
		if err != nil {
			c.mu.Lock()
			c.failed = c.now()
			c.mu.Unlock()
			return nil, err
		}
		s := &snapshot[T]{data: data, taken: start, took: c.now().Sub(start), replica: replica}
		c.mu.Lock()
		c.cur, c.failed = s, time.Time{}
		if gen == c.gen {
			c.dirty = false // else an action came while it was read: still stale
		}
		c.mu.Unlock()
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	// The snapshot just computed, or one computed after it.
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur, nil
}

// invalidate marks the snapshot stale after an action changed what it
// shows: it is still served, marked so, until a new one is computed; the
// computation starts now, in the background, when the page was viewed
// within idle (else at its next view).
func (c *cache[T]) invalidate() {
	c.mu.Lock()
	c.gen++
	if c.cur == nil {
		c.mu.Unlock()
		return
	}
	c.dirty = true
	start := c.refreshing == nil && !c.viewed.IsZero() && c.now().Sub(c.viewed) < c.idle
	if start {
		c.refreshing = make(chan struct{})
	}
	c.mu.Unlock()
	if start {
		go c.background(context.Background())
	}
}

// wait waits until no background refresh runs (for the tests:
// export_test.go).
func (c *cache[T]) wait(ctx context.Context) error {
	c.mu.Lock()
	done := c.refreshing
	c.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
