package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/recovered"
)

// Issue 24, point 4: a panic anywhere is exit 1 with its stack in the log,
// never Go's exit 2 (which the contract and the shipped podFailurePolicy
// read as a configuration error): in the command's own goroutine (Main
// recovers it) and in a worker goroutine (the product's goroutines run
// under recovered.Func, which hands it back as an error).
func TestAPanicAnywhereIsExit1WithItsStack(t *testing.T) {
	for name, run := range map[string]func() error{
		"in the command": func() error { panicHere(); return nil },
		"in a worker goroutine": func() error {
			var g errgroup.Group
			g.Go(recovered.Func(func() error { panicHere(); return nil }))
			return g.Wait()
		},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "engagement-test", RunE: func(*cobra.Command, []string) error { return run() }}
			cmd.Flags().String("log-format", "json", "")
			var stdout, stderr bytes.Buffer
			code := cli.Main(context.Background(), cmd, nil, cli.Env{Stdout: &stdout, Stderr: &stderr})
			var line struct {
				Message  string `json:"message"`
				Stack    string `json:"stack"`
				ExitCode int    `json:"exit_code"`
			}
			if err := json.Unmarshal(stderr.Bytes(), &line); err != nil {
				t.Fatalf("stderr %q is not one JSON log line: %v", stderr.String(), err)
			}
			if code != cli.ExitFatal || line.ExitCode != 1 || !strings.Contains(line.Message, "internal error") ||
				!strings.Contains(line.Message, "boom") || !strings.Contains(line.Stack, "panicHere") {
				t.Errorf("exit %d, log line %+v; want exit 1, the panic's message and its stack", code, line)
			}
		})
	}
}

func panicHere() { panic("boom") }
