package main_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/pgtest"
)

// TestDemo runs the demo as `make demo` does, on a database of its own,
// and checks that a newcomer sees users move, messages delivered, and a
// clean bill from status and verify.
func TestDemo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server, err := pgtest.ServerURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, name := range []string{"engagement-daily", "engagement-weekly", "queue-process", "engagementctl"} {
		if err := os.Symlink(cmdtest.Build(t, "./cmd/"+name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	const database = "engagement_demo_test"
	t.Cleanup(func() {
		if err := pgtest.DropDatabase(context.Background(), database); err != nil {
			t.Errorf("drop the demo's database: %v", err)
		}
	})

	demo := cmdtest.Build(t, "./internal/demo")
	res := cmdtest.Run(t, demo, cmdtest.Env("TEST_DATABASE_URL="+server), "-bin", bin, "-database", database, "-users", "200")
	if res.Code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	sent := regexp.MustCompile(`queue-process via log: (\d+) processed, (\d+) sent, 0 retried, 0 failed`).FindStringSubmatch(res.Stdout)
	if sent == nil || sent[1] == "0" || sent[1] != sent[2] {
		t.Errorf("the demo does not show every queued message delivered; stdout:\n%s", res.Stdout)
	}
	for _, want := range []string{
		"inactivity_14d",          // the daily job's summary
		"(2026-W48)",              // the weekly job's
		"goodbye_sent",            // users moved
		"engagement status as of", // engagementctl status
		"all invariants hold",     // engagementctl verify
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("the demo's output lacks %q; stdout:\n%s", want, res.Stdout)
		}
	}
	if strings.Contains(res.Stdout+res.Stderr, "@s.whatsapp.net") {
		t.Error("the demo printed a WhatsApp JID")
	}
}
