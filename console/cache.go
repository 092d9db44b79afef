package console

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// The overview, queue, verify and forecast pages read every user, every
// message or the whole log: at a million users that is seconds of work, too
// slow to make an operator wait for on every load, and pointless to repeat
// for each one of them. Their data is a snapshot: computed at most once per
// MaxAge (one computation however many requests ask at once), refreshed
// in the background while the console runs (Console.Refresh), and shown
// with when it was computed. An action that changes the queue drops the
// snapshots, so the next load is computed afresh. The other pages (runs,
// a user, audit) read a few rows and are always live.

// snapshot is a page's data and when it was computed.
type snapshot struct {
	data  any
	taken time.Time
	took  time.Duration
}

// cache holds one page's latest snapshot.
type cache struct {
	name   string
	load   func(ctx context.Context) (any, error)
	maxAge time.Duration
	now    func() time.Time

	mu     sync.Mutex
	viewed time.Time // the last get; the zero time until then
	cur    *snapshot
	gen    int // bumped by drop, so a computation begun before it is not kept
	group  singleflight.Group
}

// get returns a snapshot no older than maxAge, computing it when there is
// none; concurrent callers share one computation.
func (c *cache) get(ctx context.Context) (*snapshot, error) {
	c.mu.Lock()
	cur := c.cur
	c.viewed = c.now()
	c.mu.Unlock()
	if cur != nil && c.now().Sub(cur.taken) < c.maxAge {
		return cur, nil
	}
	return c.refresh(ctx)
}

// viewedSince reports whether the page was asked for since t, or has no
// snapshot yet (the first round computes every page).
func (c *cache) viewedSince(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur == nil || c.viewed.After(t)
}

// refresh computes a new snapshot (or joins the one under way).
func (c *cache) refresh(ctx context.Context) (*snapshot, error) {
	v, err, _ := c.group.Do(c.name, func() (any, error) {
		c.mu.Lock()
		gen := c.gen
		c.mu.Unlock()
		start := c.now()
		// Not the request's context: a computation others wait for must
		// not end because its first asker went away.
		data, err := c.load(context.WithValue(context.WithoutCancel(ctx), snapshotKey{}, true))
		if err != nil {
			return nil, err
		}
		s := &snapshot{data: data, taken: start, took: c.now().Sub(start)}
		c.mu.Lock()
		if gen == c.gen {
			c.cur = s
		}
		c.mu.Unlock()
		return s, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*snapshot), nil
}

// drop forgets the snapshot: the next get computes one.
func (c *cache) drop() {
	c.mu.Lock()
	c.cur = nil
	c.gen++
	c.mu.Unlock()
	c.group.Forget(c.name)
}
