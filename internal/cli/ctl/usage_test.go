package ctl

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/cli"
)

// A value out of range is a usage error (exit 2, one line naming the flag)
// found before any work, as for the jobs and queue-process (internal/cli's
// TestOutOfRangeFlagsAreUsageErrors). The database URL points at a closed
// port: reaching it would exit 1.
func TestOutOfRangeFlagsAreUsageErrors(t *testing.T) {
	const unreachable = "postgres://scheduler@127.0.0.1:1/engagement?connect_timeout=1"
	for _, r := range []struct {
		args []string
		flag string
	}{
		{[]string{"migrate", "up", "--lock-timeout", "-1s"}, "--lock-timeout"},
		{[]string{"migrate", "up", "--wait", "0s"}, "--wait"},
		{[]string{"status", "--runs", "0"}, "--runs"},
		{[]string{"cleanup", "--batch-size", "0"}, "--batch-size"},
		{[]string{"verify", "--retention", "0s"}, "--retention"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"--database-url", unreachable}, r.args...)
		code := cli.Main(context.Background(), NewCommand(), args, cli.Env{Stdout: &stdout, Stderr: &stderr})
		if code != cli.ExitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), r.flag) || stdout.Len() != 0 {
			t.Errorf("engagementctl %v: exit %d, stdout %q, stderr %q; want exit %d and one line naming %s", r.args, code, stdout.String(), stderr.String(), cli.ExitUsage, r.flag)
		}
	}
}
