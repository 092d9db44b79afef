package queuecmd_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
)

// deliveryFlagNames are the flags queuecmd.DeliveryFlags registers.
func deliveryFlagNames() []string {
	var f queuecmd.DeliveryFlags
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	f.Register(fs, "x")
	var names []string
	fs.VisitAll(func(fl *pflag.Flag) { names = append(names, fl.Name) })
	return names
}

// helpSections splits --help output into its sections: title -> flag names.
func helpSections(help string) map[string][]string {
	sections := map[string][]string{}
	title := ""
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
			title = strings.TrimSuffix(line, ":")
		case strings.HasPrefix(strings.TrimSpace(line), "-"):
			for _, field := range strings.Fields(line) {
				if name, ok := strings.CutPrefix(field, "--"); ok {
					sections[title] = append(sections[title], name)
					break
				}
			}
		}
	}
	return sections
}

// Issue 18, item 5: the jobs' trailing queue step keeps its flags, listed
// in --help as one section of their own, and they are the very flags of
// queue-process (one function registers both), listed there as the
// delivery flags.
func TestQueueStepFlagsAreOneSectionOfHelp(t *testing.T) {
	want := deliveryFlagNames()
	if len(want) < 15 {
		t.Fatalf("DeliveryFlags registers %d flags: %v; the test expects the whole delivery set", len(want), want)
	}
	for _, c := range []struct {
		name  string
		cmd   func() *cobra.Command
		group string
	}{
		{"engagement-daily", jobcmd.NewDailyCommand, queuecmd.QueueStepGroup},
		{"engagement-weekly", jobcmd.NewWeeklyCommand, queuecmd.QueueStepGroup},
		{"queue-process", queuecmd.NewCommand, queuecmd.DeliveryGroup},
	} {
		var stdout, stderr bytes.Buffer
		if code := cli.Main(context.Background(), c.cmd(), []string{"--help"}, cli.Env{Stdout: &stdout, Stderr: &stderr}); code != cli.ExitOK {
			t.Fatalf("%s --help: exit %d: %s", c.name, code, stderr.String())
		}
		sections := helpSections(stdout.String())
		if got := sections[c.group]; !slices.Equal(got, want) {
			t.Errorf("%s --help, section %q: flags %v, want the delivery flags %v\n%s", c.name, c.group, got, want, stdout.String())
		}
		for _, name := range want {
			if slices.Contains(sections["Flags"], name) {
				t.Errorf("%s --help lists --%s among the general flags too", c.name, name)
			}
		}
		for _, general := range []string{"database-url", "output", "log-level"} {
			if !slices.Contains(sections["Flags"], general) {
				t.Errorf("%s --help: --%s is not under Flags: %v", c.name, general, sections["Flags"])
			}
		}
	}
}

// Issue 18, item 5: a flag's value out of range is a usage error (exit 2,
// one line naming the flag) found before any work, the jobs' queue-step
// flags included when no transport is given. The database URL points at a
// closed port: reaching it would exit 1.
func TestOutOfRangeFlagsAreUsageErrors(t *testing.T) {
	const unreachable = "postgres://scheduler@127.0.0.1:1/engagement?connect_timeout=1"
	deliveryBad := [][]string{
		{"--workers", "0"},
		{"--workers", "65"},
		{"--send-interval", "-1s"},
		{"--max-retries", "-1"},
		{"--retry-base", "0s"},
		{"--claim-timeout", "1ms"},
		{"--max-duration", "-1s"},
		{"--dedupe-ttl", "0s"},
		{"--timezone", "Mars/Olympus_Mons"},
		{"--quiet-hours", "25:00-08:00"},
		{"--log-format", "xml"},
	}
	type run struct {
		cmd  func() *cobra.Command
		args []string
		flag string
	}
	var runs []run
	for _, bad := range deliveryBad {
		runs = append(runs,
			run{jobcmd.NewDailyCommand, bad, bad[0]},
			run{jobcmd.NewWeeklyCommand, append([]string{"--skip-send"}, bad...), bad[0]},
			run{queuecmd.NewCommand, append([]string{"--transport", "log"}, bad...), bad[0]})
	}
	runs = append(runs,
		run{jobcmd.NewDailyCommand, []string{"--batch-size", "0"}, "--batch-size"},
		run{jobcmd.NewDailyCommand, []string{"--concurrency", "9"}, "--concurrency"},
	)
	for _, r := range runs {
		var stdout, stderr bytes.Buffer
		args := append([]string{"--database-url", unreachable}, r.args...)
		code := cli.Main(context.Background(), r.cmd(), args, cli.Env{Stdout: &stdout, Stderr: &stderr})
		if code != cli.ExitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), r.flag) || stdout.Len() != 0 {
			t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit %d and one line naming %s", r.cmd().Name(), r.args, code, stdout.String(), stderr.String(), cli.ExitUsage, r.flag)
		}
	}

	// The edges of the ranges are accepted: the run then fails to connect.
	for _, ok := range [][]string{
		{"--workers", "1", "--send-interval", "0s", "--max-retries", "0", "--max-duration", "0s"},
		{"--workers", "64", "--log-format", "auto"},
	} {
		var stderr bytes.Buffer
		args := append([]string{"--database-url", unreachable, "--transport", "log"}, ok...)
		if code := cli.Main(context.Background(), queuecmd.NewCommand(), args, cli.Env{Stderr: &stderr}); code != cli.ExitFatal {
			t.Errorf("queue-process %v: exit %d (%s), want %d: accepted, then no database", ok, code, stderr.String(), cli.ExitFatal)
		}
	}
}

// Issue 18, item 5: each delivery flag reaches the processor as the value
// the flag says: --max-retries 0 is no retry (not the library's default),
// --send-interval 0 no pacing, and the defaults are the ones --help shows.
func TestDeliveryFlagsMeanWhatTheySay(t *testing.T) {
	parse := func(args ...string) queuecmd.DeliveryFlags {
		t.Helper()
		var f queuecmd.DeliveryFlags
		fs := pflag.NewFlagSet("", pflag.ContinueOnError)
		f.Register(fs, "x")
		if err := fs.Parse(append([]string{"--transport", "log"}, args...)); err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := parse()
	cfg, err := f.ProcessorConfig(&bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxRetries != 3 || cfg.SendInterval.String() != "500ms" || cfg.RetryBase.String() != "1s" || cfg.Workers != 16 || !cfg.Deadline.IsZero() {
		t.Errorf("defaults: max retries %d, send interval %s, retry base %s, workers %d, deadline %v; want 3, 500ms, 1s, 16, none",
			cfg.MaxRetries, cfg.SendInterval, cfg.RetryBase, cfg.Workers, cfg.Deadline)
	}
	f = parse("--max-retries", "0", "--send-interval", "0")
	if cfg, err = f.ProcessorConfig(&bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	// delivery.ProcessorConfig, as River, reads 0 as its default and -1 as
	// off.
	if cfg.MaxRetries != -1 || cfg.SendInterval != -1 {
		t.Errorf("--max-retries 0 --send-interval 0: max retries %d, send interval %s; want -1 and -1ns (off)", cfg.MaxRetries, cfg.SendInterval)
	}
}
