package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/pgtest"
)

// TestSeedCommand: engagementctl seed fills an empty database, is hidden
// from help, refuses a database that has users (exit 2) unless --force,
// and rejects bad flags before touching the database (exit 2).
func TestSeedCommand(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		cmd := NewCtlCommand()
		cmd.SetOut(&out)
		code := Main(context.Background(), cmd, append([]string{"--database-url", dbURL}, args...), &errOut)
		return code, out.String(), errOut.String()
	}
	asOf := "--as-of=2026-11-23T06:00:00Z"

	for _, bad := range [][]string{{"seed", asOf}, {"seed", "--users", "10"}, {"seed", "--users", "-1", asOf}, {"seed", "--users", "10", "--as-of", "monday"}} {
		if code, _, stderr := run(bad...); code != ExitUsage {
			t.Errorf("%v: exit %d (%s), want %d", bad, code, stderr, ExitUsage)
		}
	}

	code, stdout, stderr := run("seed", "--users", "1000", "--seed", "7", asOf, "--output", "json")
	if code != ExitOK {
		t.Fatalf("seed: exit %d: %s", code, stderr)
	}
	var got seedResult
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("seed --output json printed %q: %v", stdout, err)
	}
	if got.Stats.Users != 1000 || got.Users != 1000 || got.Seed != 7 {
		t.Errorf("seed reported %+v, want 1000 users of seed 7", got)
	}

	if code, _, stderr := run("seed", "--users", "10", "--seed", "8", asOf); code != ExitUsage || !strings.Contains(stderr, "already has 1000 users") {
		t.Errorf("seeding a database with users: exit %d (%s), want %d naming the 1000 users", code, stderr, ExitUsage)
	}
	if code, stdout, stderr := run("seed", "--users", "10", "--seed", "8", asOf, "--force"); code != ExitOK || !strings.Contains(stdout, "now has 1010 users") {
		t.Errorf("seed --force with another seed: exit %d, %q (%s), want 0 and 1010 users", code, stdout, stderr)
	}

	if _, stdout, _ := run("--help"); strings.Contains(stdout, "seed") {
		t.Errorf("engagementctl --help lists the hidden seed command:\n%s", stdout)
	}
}
