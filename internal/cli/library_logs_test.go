package cli_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// redisDown is a dedupe store whose Redis is down: nothing listens on
// 127.0.0.1:1, so every dial is refused at once.
const redisDown = "redis://127.0.0.1:1/0"

// jsonLine is what the tests read of a stderr line.
type jsonLine struct {
	Level    string `json:"level"`
	App      string `json:"app"`
	Library  string `json:"library"`
	Message  string `json:"message"`
	ExitCode *int   `json:"exit_code"`
}

// Issue 31, item 7: with Redis down, queue-process --dedupe-store redis://…
// printed 4–8 raw "redis: … pool.go:770: … failed to dial" lines, the
// Redis client's own logger writing to the process's stderr, besides its
// own error. With JSON logs every stderr line must be a JSON log line: the
// library's logger goes through the run's, or nowhere. The built binary,
// so that what goes to the process's stderr is seen; with the store
// failing closed (the run stops, exit 1, its error the last line) and open
// (each send warns and goes ahead, exit 0). The webhook transport: the log
// transport writes lines of its own.
func TestRedisDownLeavesOnlyJSONLinesOnStderr(t *testing.T) {
	t.Parallel()
	bin := cmdtest.Build(t, "./cmd/queue-process")
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
	}{
		{"fail closed", nil, 1},
		{"fail open", []string{"--dedupe-fail-open"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, url := pgtest.NewPool(t)
			fixture.DueReviews(t, pool, 3, "library-logs-")
			bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			t.Cleanup(bot.Close)
			// No LOG_FORMAT: stderr is a pipe, so the logs are JSON.
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "DATABASE_URL=" + url,
				"ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL=" + bot.URL, "ENGAGEMENT_WEBHOOK_SECRET=topsecret"}
			args := append([]string{"--send-interval", "0", "--dedupe-store", redisDown}, tt.args...)
			res := cmdtest.Run(t, bin, env, args...)
			if res.Code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", res.Code, tt.wantCode, res.Stderr)
			}
			lines := cmdtest.Lines(res.Stderr)
			for i, l := range lines {
				var line jsonLine
				if json.Unmarshal([]byte(l), &line) != nil || line.Level == "" {
					t.Errorf("stderr line %d is not a JSON log line: %s", i+1, l)
				}
				if strings.Contains(l, "pool.go") || strings.HasPrefix(l, "redis: ") {
					t.Errorf("stderr line %d is the Redis client's own: %s", i+1, l)
				}
			}
			if tt.wantCode == 0 || len(lines) == 0 {
				return
			}
			var last jsonLine
			if json.Unmarshal([]byte(lines[len(lines)-1]), &last) != nil || last.Level != "error" ||
				last.ExitCode == nil || *last.ExitCode != res.Code || !strings.HasPrefix(last.Message, "queue-process: ") {
				t.Errorf("the last stderr line %s; want the run's error, \"level\":\"error\", \"exit_code\":%d", lines[len(lines)-1], res.Code)
			}
		})
	}
}

// The Redis client's own messages are not lost: they go through the
// process's logger, at debug level (each failure it reports is also
// returned to the store, which the run logs or stops on), tagged with the
// library. The built binary: in a test process, whose runs share the Redis
// client's one logger, they are dropped.
func TestRedisClientLogsGoThroughTheRunsLogger(t *testing.T) {
	t.Parallel()
	bin := cmdtest.Build(t, "./cmd/queue-process")
	pool, url := pgtest.NewPool(t)
	fixture.DueReviews(t, pool, 1, "library-logs-")
	res := cmdtest.Run(t, bin, cmdtest.Env("DATABASE_URL="+url),
		"--transport", "log", "--send-interval", "0", "--dedupe-store", redisDown, "--log-level", "debug")
	if res.Code != 1 {
		t.Fatalf("exit %d, want 1 (the store fails closed); stderr: %s", res.Code, res.Stderr)
	}
	for _, l := range cmdtest.Lines(res.Stderr) {
		var line jsonLine
		if json.Unmarshal([]byte(l), &line) == nil && line.Library == "go-redis" {
			if line.Level != "debug" || line.App != "queue-process" || !strings.Contains(line.Message, "dial") {
				t.Errorf("the Redis client's line %s; want level debug, app queue-process, its message", l)
			}
			return
		}
	}
	t.Errorf("no line of the Redis client's (\"library\":\"go-redis\") on stderr with --log-level debug: %s", res.Stderr)
}
