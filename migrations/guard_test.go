package migrations

import (
	"context"
	"errors"
	"testing"
)

// TestConcurrentIndexes: the indexes built CONCURRENTLY are found in the
// embedded migrations, with their table and own statement, so Up can
// rebuild one left INVALID.
func TestConcurrentIndexes(t *testing.T) {
	want := map[string]struct {
		version uint
		table   string
	}{
		"transactions_created_at_idx":              {2, "transactions"},
		"engagement_state_transitions_job_run_idx": {6, "engagement_state_transitions"},
		"engagement_message_queue_job_run_idx":     {7, "engagement_message_queue"},
	}
	got := map[string]concurrentIndex{}
	for _, idx := range concurrentIndexes() {
		got[idx.name] = idx
	}
	for name, w := range want {
		idx, ok := got[name]
		if !ok {
			t.Errorf("index %s of migration %d not found among %v", name, w.version, concurrentIndexes())
			continue
		}
		if idx.version != w.version || idx.table != w.table || idx.droppedLater {
			t.Errorf("index %s: version %d table %s droppedLater %v, want %d %s false", name, idx.version, idx.table, idx.droppedLater, w.version, w.table)
		}
		if _, ok := parseConcurrentIndex([]byte(idx.create)); !ok {
			t.Errorf("index %s: its statement %q does not parse back", name, idx.create)
		}
	}
	for _, body := range []string{
		"CREATE INDEX CONCURRENTLY a ON t (x); CREATE INDEX CONCURRENTLY b ON t (y);",
		"CREATE INDEX a ON t (x);",
		"DROP INDEX CONCURRENTLY IF EXISTS a;",
	} {
		if idx, ok := parseConcurrentIndex([]byte(body)); ok {
			t.Errorf("parseConcurrentIndex(%q) = %+v, want no single CONCURRENTLY build", body, idx)
		}
	}
}

// TestPreviousVersion: the version a dirty one is forced back to.
func TestPreviousVersion(t *testing.T) {
	if got := previousVersion(versions[0]); got != 0 {
		t.Errorf("previousVersion(%d) = %d, want 0", versions[0], got)
	}
	for i := 1; i < len(versions); i++ {
		if got := previousVersion(versions[i]); got != versions[i-1] {
			t.Errorf("previousVersion(%d) = %d, want %d", versions[i], got, versions[i-1])
		}
	}
}

// TestForceRejectsUnknownVersions: Force refuses a version no embedded
// migration has, before connecting to anything.
func TestForceRejectsUnknownVersions(t *testing.T) {
	mg := &Migrator{ctx: context.Background()}
	if err := mg.Force(Latest + 1); !errors.Is(err, ErrUnknownVersion) {
		t.Errorf("Force(%d) = %v, want ErrUnknownVersion", Latest+1, err)
	}
}
