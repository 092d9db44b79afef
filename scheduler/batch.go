package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// batchAttempts is how many times a batch is tried while its connection
// keeps being lost (pg_terminate_backend, a failover, a restart). A batch is
// one statement that re-checks every user and queues under idempotency keys,
// so running it again is safe: if the lost attempt did commit, the retry
// finds those users moved (or their keys taken) and changes nothing.
//
// Attempt n+1 starts n×lostRetryDelay after attempt n failed (1, 2, 3 s):
// about 6 s in all for a restarting server to come back. A longer outage
// ends the run with exit 1; the next run does what is left.
const (
	batchAttempts  = 4
	lostRetryDelay = time.Second
)

// span is a range [first, end) of row positions in user_engagement_states.
// A position is a ctid, block<<16 | offset (an offset fits 16 bits), so a
// span can be halved down to one row whatever the page size.
type span struct{ first, end uint64 }

// pageSpan is the rows of pages [first, end).
func pageSpan(first, end int64) span { return span{first: uint64(first) << 16, end: uint64(end) << 16} }

func tid(pos uint64) pgtype.TID {
	return pgtype.TID{BlockNumber: uint32(pos >> 16), OffsetNumber: uint16(pos), Valid: true}
}

// tids are the span's bounds as ctids, for @first and @end.
func (s span) tids() (first, end pgtype.TID) { return tid(s.first), tid(s.end) }

// batchCounts are what one chunk's statement reports, its row: every move
// statement returns these columns (candidates, moved, …), so each one's
// generated row converts to it (moveRow).
type batchCounts struct {
	Candidates    int // users in the chunk the step's state and dates select
	Moved         int // of them, moved (or, weekly, reviewed)
	Queued        int // new queue rows
	Locked        int // eligible users whose row another transaction held
	OptedOut      int
	NoDestination int
	HeldOut       int // of the moved, held out: nothing queued (the goodbye's holdout)
	// DuplicateKeys are the keys the chunk found already taken, listed
	// only with @log_duplicates (debug logs on); never summed.
	DuplicateKeys []string
}

// add sums o's counters into c.
func (c *batchCounts) add(o batchCounts) {
	c.Candidates += o.Candidates
	c.Moved += o.Moved
	c.Queued += o.Queued
	c.Locked += o.Locked
	c.OptedOut += o.OptedOut
	c.NoDestination += o.NoDestination
	c.HeldOut += o.HeldOut
}

// batcher moves the users of a chunk of rows with one statement and, when a
// statement fails, isolates the rows that make it fail.
// Its methods may run concurrently.
type batcher struct {
	move func(ctx context.Context, s span) (batchCounts, error)
	// userAt names the user whose row is at a position, for the report of
	// a row that fails alone.
	userAt func(ctx context.Context, at pgtype.TID) (string, error)
	// lost, when set, is called before a batch whose connection was lost is
	// tried again (attempt is the one that failed).
	lost func(attempt int, err error)
	// stop, when set and cancelled, asks the run to stop: a batch whose
	// connection was lost is then not tried again (errStopped).
	stop     context.Context
	mu       sync.Mutex // guards the fields below
	total    batchCounts
	failures []failure
	// The last finished chunk: how many users it held over how many pages.
	lastCandidates, lastPages int64
}

type failure struct {
	userID string // "" when the row moved before it could be named
	err    error
}

// density is how many of the step's users a page held in the last chunk
// that finished whole, and whether there was one.
func (b *batcher) density() (float64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastPages == 0 {
		return 0, false
	}
	return float64(b.lastCandidates) / float64(b.lastPages), true
}

// moveIsolating moves the users in s in one statement. When the database
// rejects it, the span is split in halves and each is retried, down to
// single rows, so one bad row fails alone (in about 2·log2(n) statements)
// and every other user commits. Errors that have nothing to do with the
// rows (the connection is gone, the statement is wrong) stop the run
// instead: retrying them row by row would only fail n times. A statement
// that hits statement_timeout or lock_timeout is split too (a smaller one
// may fit), but at a single row it stops the run: the limit, not the row,
// is the problem.
func (b *batcher) moveIsolating(ctx context.Context, s span) error {
	c, err := b.moveRetrying(ctx, s)
	switch {
	case err == nil:
		b.mu.Lock()
		b.total.add(c)
		if pages := int64(s.end>>16) - int64(s.first>>16); s.first&0xffff == 0 && s.end&0xffff == 0 && pages > 0 {
			b.lastCandidates, b.lastPages = int64(c.Candidates), pages
		}
		b.mu.Unlock()
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, errStopped), postgres.IsRowIndependent(err):
		return err
	case s.end-s.first == 1 && postgres.IsStatementLimit(err):
		// A timeout splitting could not get under: the limit, a lock
		// held elsewhere (a plain CREATE INDEX), not this user.
		return fmt.Errorf("a statement over a single row hit a limit (statement_timeout or lock_timeout); not a fault of the row's, so the run stops: %w", err)
	case s.end-s.first == 1:
		f := failure{err: err}
		if b.userAt != nil {
			id, lookupErr := b.userAt(ctx, tid(s.first))
			if lookupErr != nil && !errors.Is(lookupErr, pgx.ErrNoRows) {
				return fmt.Errorf("name the user who failed: %w", lookupErr)
			}
			f.userID = id
		}
		b.mu.Lock()
		b.failures = append(b.failures, f)
		b.mu.Unlock()
		return nil
	}
	mid := s.first + (s.end-s.first)/2
	if err := b.moveIsolating(ctx, span{first: s.first, end: mid}); err != nil {
		return err
	}
	return b.moveIsolating(ctx, span{first: mid, end: s.end})
}

// errStopped ends a step whose batch lost its connection after the run
// was told to stop: the batch is not tried again, the next run does it.
var errStopped = errors.New("told to stop: a batch that lost its connection is left to the next run")

// moveRetrying moves the users in s, trying again (up to batchAttempts in
// all, waiting longer each time) while the statement's connection is lost;
// any other outcome is returned as is.
func (b *batcher) moveRetrying(ctx context.Context, s span) (c batchCounts, err error) {
	for attempt := 1; ; attempt++ {
		c, err = b.move(ctx, s)
		if err == nil || ctx.Err() != nil || !postgres.IsConnectionLost(err) {
			return c, err
		}
		if b.stop != nil && b.stop.Err() != nil {
			return batchCounts{}, errStopped
		}
		if attempt == batchAttempts {
			return batchCounts{}, fmt.Errorf("the database connection was lost %d times in a row: %w", attempt, err)
		}
		if b.lost != nil {
			b.lost(attempt, err)
		}
		var stopping <-chan struct{} // nil: never
		if b.stop != nil {
			stopping = b.stop.Done()
		}
		wait := time.NewTimer(time.Duration(attempt) * lostRetryDelay)
		select {
		case <-ctx.Done():
			wait.Stop()
			return batchCounts{}, err
		case <-stopping:
			wait.Stop()
			return batchCounts{}, errStopped
		case <-wait.C:
		}
	}
}

// Chunk sizes, in pages: the first chunks' (a page of 8 kB holds about a
// hundred users, so a chunk of batchSize/100 pages holds at most about
// batchSize users), and the most a chunk may span, however sparse the
// step's users: 8 MB of table, read in milliseconds, and at most about
// 100,000 users should the chunk after a sparse one find every row
// qualifies (a statement of a few seconds, far from any timeout).
const (
	usersPerPageGuess = 100
	maxChunkPages     = 1024
	maxChunkGrowth    = 8 // a chunk spans at most this many times the last one's pages
)

// chunkSizer sizes the next chunk to hold about target users.
type chunkSizer struct {
	target int
	last   int64 // the previous chunk's pages
}

// blocks is the next chunk's size in pages, given the users per page of the
// last chunk that finished (when known).
func (z *chunkSizer) blocks(density float64, known bool) int64 {
	n := max(int64(z.target/usersPerPageGuess), 1)
	if known {
		n = maxChunkPages // no user in the last chunk: as far as allowed
		if pages := float64(z.target) / density; density > 0 && pages < maxChunkPages {
			n = max(int64(pages), 1)
		}
		if z.last > 0 {
			n = min(n, z.last*maxChunkGrowth)
		}
	}
	n = min(n, maxChunkPages)
	z.last = n
	return n
}
