package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
)

// TestAsOfBefore2000IsAUsageError: issue 15 saw `--as-of
// 0001-01-01T00:00:00Z` run silently as of the database clock (the zero
// time meant "not given"). Every command taking --as-of, and the jobs'
// ENGAGEMENT_AS_OF, must reject an instant before 2000-01-01 with exit 2
// and one line naming the flag, before touching the database (the URL
// here points at a closed port, so reaching it would exit 1).
func TestAsOfBefore2000IsAUsageError(t *testing.T) {
	const unreachable = "postgres://scheduler@127.0.0.1:1/engagement?connect_timeout=1"
	commands := []struct {
		name string
		cmd  func() *cobra.Command
		args []string
	}{
		{"engagement-daily", jobcmd.NewDailyCommand, nil},
		{"engagement-weekly", jobcmd.NewWeeklyCommand, nil},
		{"engagementctl status", ctl.NewCommand, []string{"status"}},
		{"engagementctl verify", ctl.NewCommand, []string{"verify"}},
		{"engagementctl cleanup", ctl.NewCommand, []string{"cleanup"}},
		{"engagementctl seed", ctl.NewCommand, []string{"seed", "--users", "10"}},
	}
	for _, asOf := range []string{"0001-01-01T00:00:00Z", "1999-12-31T23:59:59Z", "1999-12-31T20:59:59-03:00"} {
		for _, c := range commands {
			var stderr bytes.Buffer
			args := append(append([]string{"--database-url", unreachable}, c.args...), "--as-of", asOf)
			code := cli.Main(context.Background(), c.cmd(), args, cli.Env{Stderr: &stderr})
			if code != cli.ExitUsage || !strings.Contains(stderr.String(), "--as-of") || strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("%s --as-of %s: exit %d, stderr %q; want exit %d and one line naming --as-of", c.name, asOf, code, stderr.String(), cli.ExitUsage)
			}
		}
	}

	// The jobs read ENGAGEMENT_AS_OF when --as-of is absent.
	env := cli.MapEnv([]string{"ENGAGEMENT_AS_OF=0001-01-01T00:00:00Z"})
	for _, c := range commands[:2] {
		var stderr bytes.Buffer
		code := cli.Main(context.Background(), c.cmd(), []string{"--database-url", unreachable}, cli.Env{LookupEnv: env, Stderr: &stderr})
		if code != cli.ExitUsage || !strings.Contains(stderr.String(), "ENGAGEMENT_AS_OF") {
			t.Errorf("%s with ENGAGEMENT_AS_OF=0001-01-01T00:00:00Z: exit %d, stderr %q; want exit %d naming ENGAGEMENT_AS_OF", c.name, code, stderr.String(), cli.ExitUsage)
		}
	}

	// 2000-01-01 itself is accepted (this run then fails to connect: exit 1).
	var stderr bytes.Buffer
	if code := cli.Main(context.Background(), ctl.NewCommand(), []string{"--database-url", unreachable, "status", "--as-of", "2000-01-01T00:00:00Z"}, cli.Env{Stderr: &stderr}); code != cli.ExitFatal {
		t.Errorf("status --as-of 2000-01-01T00:00:00Z: exit %d (%s), want %d (accepted, then no database)", code, stderr.String(), cli.ExitFatal)
	}
}
