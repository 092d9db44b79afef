package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
)

// --log-format auto (the default) writes JSON lines when stderr is not a
// terminal; LOG_FORMAT=auto is accepted like the flag.
func TestLogFormatAuto(t *testing.T) {
	for _, format := range []string{"auto", "AUTO", ""} {
		var buf bytes.Buffer
		log, err := cli.NewLogFlags("info", format).Logger(&buf, "engagement-test")
		if err != nil {
			t.Fatalf("--log-format %q: %v", format, err)
		}
		log.Info().Msg("hello")
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["message"] != "hello" {
			t.Errorf("--log-format %q into a buffer wrote %q, want a JSON line", format, buf.String())
		}
	}
	var stderr bytes.Buffer
	env := cli.Env{LookupEnv: cli.MapEnv([]string{"LOG_FORMAT=auto"}), Stderr: &stderr}
	if code := cli.Main(context.Background(), jobcmd.NewDailyCommand(), []string{"--database-url", "postgres://x@127.0.0.1:1/db?connect_timeout=1"}, env); code != cli.ExitFatal {
		t.Errorf("LOG_FORMAT=auto: exit %d (%s), want %d: accepted, then no database", code, stderr.String(), cli.ExitFatal)
	}
}
