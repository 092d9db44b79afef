package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/redistest"
)

func TestMain(m *testing.M) { cmdtest.Main(m) }

// TestPrepareSaysWhatTheTestsNeed: make test's first step names every
// package the tests use, with what uses it and whether it was found,
// before it installs or starts anything, and ends ready.
func TestPrepareSaysWhatTheTestsNeed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pg, err := pgtest.ServerURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	redis, err := redistest.ServerURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bin := cmdtest.Build(t, "./internal/testkit/localsvc/prepare")
	res := cmdtest.Run(t, bin, cmdtest.Env("DATABASE_URL="+pg, "REDIS_URL="+redis))
	if res.Code != 0 {
		t.Fatalf("prepare: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	lines := cmdtest.Lines(res.Stdout)
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "make test: what the tests need") {
		t.Fatalf("prepare's first line: %q, want what the tests need", lines)
	}
	for _, pkg := range []string{"postgresql", "pgbouncer", "redis-server", "prometheus", "prometheus-pushgateway", "nodejs", "npm"} {
		found := false
		for _, l := range lines {
			f := strings.Fields(l)
			found = found || len(f) > 2 && f[0] == pkg
		}
		if !found {
			t.Errorf("prepare does not name %s:\n%s", pkg, res.Stdout)
		}
	}
	if !strings.Contains(res.Stdout, "postgresql") || !strings.Contains(res.Stdout, "not needed: DATABASE_URL is set") {
		t.Errorf("with DATABASE_URL set, prepare should say PostgreSQL is not needed:\n%s", res.Stdout)
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "make test: ready") {
		t.Errorf("prepare's last line: %q, want ready", last)
	}
}
