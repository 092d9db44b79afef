package scheduler

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// A user the bot brings back (new activity) before the chunk runs is not
// moved, and neither fails nor counts as skipped: the chunk's statement
// checks each user's state and dates when it runs.
func TestMoveSkipsUserWhoseStateChanged(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	asOf := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * 24 * time.Hour)})
	other := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * 24 * time.Hour)})

	steps, err := dailySteps(asOf, Config{SendReminder: true})
	if err != nil {
		t.Fatal(err)
	}
	inactivity := steps[0]

	// The user writes to the bot before the chunk runs.
	fixture.SetState(t, pool, user, fixture.StateChange{LastActivity: asOf})
	b := batcher{move: func(ctx context.Context, s span) (batchCounts, error) {
		m := moveArgs{shardIndex: 0, shardCount: 1, runID: ptr(int64(0))}
		m.first, m.end = s.tids()
		return inactivity.move.run(ctx, pool, m) // no run's fence: the statement alone
	}}
	if err := b.moveIsolating(ctx, pageSpan(0, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if want := (batchCounts{Candidates: 1, Moved: 1, Queued: 1}); !reflect.DeepEqual(b.total, want) || len(b.failures) != 0 {
		t.Errorf("counts %+v, %d failed; want %+v: the other user moved, the changed one left alone", b.total, len(b.failures), want)
	}
	if st := fixture.StateOf(t, pool, user).State; st != "active" {
		t.Errorf("state = %q, want active", st)
	}
	if st := fixture.StateOf(t, pool, other).State; st != "goodbye_sent" {
		t.Errorf("the other user's state = %q, want goodbye_sent", st)
	}
}

func TestChunkSizer(t *testing.T) {
	t.Parallel()
	z := chunkSizer{target: 5000}
	steps := []struct {
		density float64
		known   bool
		want    int64
	}{
		{0, false, 50},      // nothing finished yet: at most ~100 users a page
		{0, false, 50},      // still nothing
		{10, true, 400},     // 10 users a page: 500 pages would do, growth is capped at 8×
		{10, true, 500},     // now it fits
		{100, true, 50},     // denser pages, smaller chunks
		{0, true, 400},      // an empty chunk grows the next 8×, no more
		{0.001, true, 1024}, // sparse: keep growing, up to the cap
		{math.SmallestNonzeroFloat64, true, 1024},
		{200, true, 25}, // a dense region after a sparse one: back at once
	}
	for i, s := range steps {
		if got := z.blocks(s.density, s.known); got != s.want {
			t.Errorf("chunk %d (density %v, known %v): %d pages, want %d", i, s.density, s.known, got, s.want)
		}
	}
}

func TestSpanPositions(t *testing.T) {
	t.Parallel()
	s := pageSpan(3, 5)
	first, end := s.tids()
	if first != (pgtype.TID{BlockNumber: 3, OffsetNumber: 0, Valid: true}) || end != (pgtype.TID{BlockNumber: 5, Valid: true}) {
		t.Errorf("pages 3..5 are ctids %v..%v, want (3,0)..(5,0)", first, end)
	}
	// Halving goes down to single rows inside a page.
	mid := s.first + (s.end-s.first)/2
	if got := tid(mid); got != (pgtype.TID{BlockNumber: 4, OffsetNumber: 0, Valid: true}) {
		t.Errorf("the middle of pages 3..5 is %v, want (4,0)", got)
	}
	if got := tid(s.first + 7); got != (pgtype.TID{BlockNumber: 3, OffsetNumber: 7, Valid: true}) {
		t.Errorf("position 7 of page 3 is %v, want (3,7)", got)
	}
}
