package ctl

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
)

// refusingDatabase is a database URL whose server closes every connection
// at once, and a count of the connections made to it: a run that tried to
// connect shows there, and fails fast.
func refusingDatabase(t *testing.T) (url string, connections func() int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return "postgres://scheduler:pw@" + ln.Addr().String() + "/engagement?connect_timeout=5&sslmode=disable", n.Load
}

// ctlWith is engagementctl with only the subcommand sub builds, for tests
// that pass sub a runF.
func ctlWith(sub func(databaseURL *string) *cobra.Command) *cobra.Command {
	var databaseURL string
	root := &cobra.Command{Use: "engagementctl", Args: cobra.NoArgs, RunE: missingSubcommand}
	cli.RegisterDatabaseURL(root.PersistentFlags(), &databaseURL)
	root.AddCommand(sub(&databaseURL))
	return root
}

// The runF hook runs a command's flag parsing and Validate and hands over the
// options, without a database: here requeue's filter, from its flags and
// the environment, exactly as a run would get it.
func TestRunFSeesTheOptionsARunWouldGet(t *testing.T) {
	t.Parallel()
	refusing, connections := refusingDatabase(t)
	var got *requeueOptions
	cmd := ctlWith(func(u *string) *cobra.Command {
		return newRequeueCommand(u, func(o *requeueOptions) error { got = o; return nil })
	})
	const id1, id2 = "7c9e6679-7425-40de-944b-e07fc1f90ae7", "0b1e2b8a-3f43-4c3c-9d5e-0b4c1f6e8a2d"
	var stdout, stderr bytes.Buffer
	env := cli.Env{Stdout: &stdout, Stderr: &stderr, LookupEnv: cli.MapEnv([]string{"DATABASE_URL=" + refusing, "LOG_LEVEL=warn"})}
	code := cli.Main(context.Background(), cmd, []string{"requeue", "--status", "cancelled", "--reason", " operator ", "--type", " goodbye",
		"--since", "2026-03-02T06:00:00-03:00", "--ids", id1 + "," + id2, "--dry-run", "--output", "json"}, env)
	if code != cli.ExitOK || got == nil {
		t.Fatalf("requeue: exit %d (%s), options %v", code, stderr.String(), got)
	}
	f := got.filter
	if f.Status != "cancelled" || f.Reason != "operator" || f.Type != "goodbye" || !slices.Equal(f.IDs, []string{id1, id2}) ||
		!f.Since.Equal(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)) || !f.Until.IsZero() || !got.dryRun || got.output != "json" {
		t.Errorf("requeue's options: filter %+v, dry run %v, output %q; want the flags as given, trimmed, --since in UTC", f, got.dryRun, got.output)
	}
	if *got.DBURL != refusing || got.log.GetLevel().String() != "warn" {
		t.Errorf("requeue's options: database URL %q, log level %s; want the environment's", *got.DBURL, got.log.GetLevel())
	}
	if connections() != 0 || got.Pool != nil || stdout.Len() != 0 {
		t.Errorf("runF: %d connections, pool %v, stdout %q; want nothing done", connections(), got.Pool, stdout.String())
	}
}

// A usage error is found without a database: Validate runs before runF,
// which is never called, and the error is the usual one line, exit 2.
func TestRunFIsNotReachedOnAUsageError(t *testing.T) {
	t.Parallel()
	refusing, connections := refusingDatabase(t)
	for _, args := range [][]string{
		{"cleanup", "--older-than", "0s"},
		{"cleanup", "--batch-size", "0"},
		{"cleanup", "--as-of", "yesterday"},
		{"cleanup", "--transitions-older-than", "720h"},
		{"cleanup", "--transitions-older-than", "-1h"},
		{"cleanup", "--consent-older-than", "-1h"},
	} {
		called := false
		cmd := ctlWith(func(u *string) *cobra.Command {
			return newCleanupCommand(u, func(*cleanupOptions) error { called = true; return nil })
		})
		var stderr bytes.Buffer
		code := cli.Main(context.Background(), cmd, append([]string{"--database-url", refusing}, args...), cli.Env{Stderr: &stderr})
		if code != cli.ExitUsage || called || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), args[1]) {
			t.Errorf("%v: exit %d, runF called %v, stderr %q; want %d, not called, one line naming %s", args, code, called, stderr.String(), cli.ExitUsage, args[1])
		}
	}
	// The edges are accepted, and reach runF with the values given.
	var got *cleanupOptions
	cmd := ctlWith(func(u *string) *cobra.Command {
		return newCleanupCommand(u, func(o *cleanupOptions) error { got = o; return nil })
	})
	var stderr bytes.Buffer
	code := cli.Main(context.Background(), cmd, []string{"--database-url", refusing, "cleanup", "--older-than", "1ns", "--batch-size", "1", "--dry-run"}, cli.Env{Stderr: &stderr})
	if code != cli.ExitOK || got == nil || got.cfg.OlderThan != time.Nanosecond || got.cfg.BatchSize != 1 || !got.cfg.DryRun {
		t.Errorf("cleanup at the edges: exit %d (%s), options %+v", code, stderr.String(), got)
	}
	if connections() != 0 {
		t.Errorf("%d connections; runF and the usage errors need none", connections())
	}
}

// Issue 44: cleanup's horizons default to 400 days and 5 years, take
// their environment variables, and 0 keeps a log whole.
func TestCleanupHorizons(t *testing.T) {
	t.Parallel()
	refusing, _ := refusingDatabase(t)
	for _, c := range []struct {
		env                  []string
		args                 []string
		transitions, consent time.Duration
	}{
		{nil, nil, 400 * 24 * time.Hour, 5 * 365 * 24 * time.Hour},
		{[]string{"ENGAGEMENT_TRANSITIONS_RETENTION=3000h", "ENGAGEMENT_CONSENT_RETENTION=0"}, nil, 3000 * time.Hour, 0},
		{[]string{"ENGAGEMENT_TRANSITIONS_RETENTION=3000h"}, []string{"--transitions-older-than", "0", "--consent-older-than", "1h"}, 0, time.Hour},
	} {
		var got *cleanupOptions
		cmd := ctlWith(func(u *string) *cobra.Command {
			return newCleanupCommand(u, func(o *cleanupOptions) error { got = o; return nil })
		})
		var stderr bytes.Buffer
		env := cli.Env{Stderr: &stderr, LookupEnv: cli.MapEnv(append([]string{"DATABASE_URL=" + refusing}, c.env...))}
		code := cli.Main(context.Background(), cmd, append([]string{"cleanup"}, c.args...), env)
		if code != cli.ExitOK || got == nil || got.cfg.TransitionsOlderThan != c.transitions || got.cfg.ConsentOlderThan != c.consent {
			t.Errorf("%v %v: exit %d (%s), options %+v; want horizons %s and %s", c.env, c.args, code, stderr.String(), got, c.transitions, c.consent)
		}
	}
}

// opt-out, opt-in and erase refuse bad input before any work: exit 2,
// one line, no connection; erase without --yes among it.
func TestConsentAndEraseUsageErrors(t *testing.T) {
	t.Parallel()
	refusing, connections := refusingDatabase(t)
	const id = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	for _, args := range [][]string{
		{"erase", "--user-id", id},
		{"erase", "--user-id", "x", "--yes"},
		{"erase", "--yes"},
		{"opt-out", "--user-id", "5511999990000"},
		{"opt-out", "--user-id", id, "--source", ""},
		{"opt-in", "--user-id", id, "--actor", strings.Repeat("a", 201)},
		{"opt-in"},
	} {
		var stderr bytes.Buffer
		code := cli.Main(context.Background(), NewCommand(), append([]string{"--database-url", refusing}, args...), cli.Env{Stderr: &stderr})
		if code != cli.ExitUsage || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, code, stderr.String())
		}
	}
	if connections() != 0 {
		t.Errorf("%d connections; usage errors need none", connections())
	}
	// The actor: --actor, else USER, else "operator".
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, nil, "operator"},
		{[]string{"USER=ana"}, nil, "ana"},
		{[]string{"USER=ana"}, []string{"--actor", "bia"}, "bia"},
	} {
		var got *eraseOptions
		cmd := ctlWith(func(u *string) *cobra.Command {
			return newEraseCommand(u, func(o *eraseOptions) error { got = o; return nil })
		})
		var stderr bytes.Buffer
		env := cli.Env{Stderr: &stderr, LookupEnv: cli.MapEnv(append([]string{"DATABASE_URL=" + refusing}, c.env...))}
		code := cli.Main(context.Background(), cmd, append([]string{"erase", "--user-id", strings.ToUpper(id), "--yes"}, c.args...), env)
		if code != cli.ExitOK || got == nil || got.actor != c.want || got.userID != id {
			t.Errorf("%v %v: exit %d (%s), options %+v; want actor %q, user %s", c.env, c.args, code, stderr.String(), got, c.want, id)
		}
	}
}
