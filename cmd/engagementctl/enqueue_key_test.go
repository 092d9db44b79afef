package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
)

// Issue 31, item 8: enqueue wrote a key holding control characters (CR/LF,
// tab, BEL), and the message then failed at delivery ("invalid
// idempotency key"). enqueue refuses such a key: exit 2, one line on
// stderr naming the flag, nothing written, with --output json too.
func TestEnqueueRefusesAKeyWithControlCharacters(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	env := cmdtest.Env("DATABASE_URL=" + url)

	for _, tc := range []struct{ name, key string }{
		{"CR LF", "week-48\r\nX-Injected: 1"},
		{"LF", "week\n48"},
		{"tab", "week\t48"},
		{"BEL", "week\a48"},
		{"DEL", "week\x7f48"},
		{"NUL", "week\x0048"},
		{"ESC", "week\x1b[31m48"},
		{"C1 NEL", "week\u008548"},
		{"not UTF-8", "week\xff48"},
	} {
		for _, output := range []string{"text", "json"} {
			res := cmdtest.Exec(t, ctl.NewCommand, env, "enqueue", "--user-id", user, "--type", "weekly_review",
				"--key", "engagement.weekly_review.celebration", "--params", `{"count":"3"}`,
				"--idempotency-key", tc.key, "--output", output)
			lines := cmdtest.Lines(res.Stderr)
			if res.Code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "--idempotency-key") {
				t.Errorf("%s, --output %s: exit %d, stderr %q; want exit 2 and one line naming --idempotency-key", tc.name, output, res.Code, res.Stderr)
				continue
			}
			if msg := cmdtest.Message(lines[0]); !strings.Contains(msg, "control character") && !strings.Contains(msg, "UTF-8") {
				t.Errorf("%s: error %q, want it to say what is wrong with the key", tc.name, msg)
			}
			if strings.ContainsAny(lines[0], "\r\a\x7f\x1b") {
				t.Errorf("%s: the error line %q carries the control character itself", tc.name, lines[0])
			}
			if output == "json" {
				var out struct {
					Error    string `json:"error"`
					ExitCode int    `json:"exit_code"`
				}
				if l := cmdtest.Lines(res.Stdout); len(l) != 1 || json.Unmarshal([]byte(l[0]), &out) != nil || out.Error == "" || out.ExitCode != 2 {
					t.Errorf("%s: stdout %q, want one JSON object with the error and exit_code 2", tc.name, res.Stdout)
				}
			}
		}
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{}); n != 0 {
		t.Errorf("%d messages written by refused calls, want none", n)
	}
}

// The key rule is one rule: every key enqueue accepts, queue-process
// delivers through the webhook under that same key (before, a key
// enqueue accepted could fail at delivery for good).
func TestEveryKeyEnqueueAcceptsIsDelivered(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	env := cmdtest.Env("DATABASE_URL=" + url)
	keys := map[string]string{ // as given → as stored and sent
		"  week-48\t\r\n":                "week-48", // surrounding space (CR/LF and tab included) is trimmed
		"manual review 48":               "manual review 48",
		"revisão semanal · 48 🎉":         "revisão semanal · 48 🎉",
		"a\u00a0b\u2003c":                "a\u00a0b\u2003c", // no-break and em spaces inside are text
		strings.Repeat("é", 128):         strings.Repeat("é", 128),
		`k"quoted"; with=sign,and/slash`: `k"quoted"; with=sign,and/slash`,
	}
	for given, want := range keys {
		res := cmdtest.Exec(t, ctl.NewCommand, env, "enqueue", "--user-id", user, "--type", "weekly_review",
			"--key", "engagement.weekly_review.celebration", "--params", `{"count":"3"}`, "--idempotency-key", given)
		if res.Code != 0 {
			t.Fatalf("enqueue %q: exit %d, stderr %q", given, res.Code, res.Stderr)
		}
		if n := fixture.CountMessages(t, pool, fixture.Messages{Key: want}); n != 1 {
			t.Fatalf("enqueue %q: %d messages under %q, want 1", given, n, want)
		}
	}

	// A key written by other means (the bot's own SQL) that breaks the
	// rule fails at delivery, for the reason enqueue gives for it.
	const badKey = "bot\nreminder"
	refused := cmdtest.Exec(t, ctl.NewCommand, env, "enqueue", "--user-id", user, "--type", "reminder", "--idempotency-key", badKey)
	if refused.Code != 2 || len(cmdtest.Lines(refused.Stderr)) != 1 {
		t.Fatalf("enqueue %q: exit %d, stderr %q; want 2, one line", badKey, refused.Code, refused.Stderr)
	}
	reason := cmdtest.Message(cmdtest.Lines(refused.Stderr)[0])
	reason = reason[strings.Index(reason, "invalid idempotency key"):]
	fixture.CtlCopyMessageWithKey(t, pool, badKey)

	bot := webhooktest.New(t)
	res := cmdtest.Exec(t, queuecmd.NewCommand, cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook",
		"ENGAGEMENT_WEBHOOK_URL="+bot.URL, "ENGAGEMENT_WEBHOOK_SECRET=s3cret"), "--send-interval", "0", "--output", "json")
	if res.Code != 0 {
		t.Fatalf("queue-process: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{}) {
		key, status, errMsg := "", m.Status, ""
		if m.IdempotencyKey != nil {
			key = *m.IdempotencyKey
		}
		if m.ErrorMessage != nil {
			errMsg = *m.ErrorMessage
		}
		switch {
		case key == badKey && (status != "failed" || !strings.Contains(errMsg, reason)):
			t.Errorf("the bot's message under %q: %s %q, want failed for the reason enqueue gave: %q", key, status, errMsg, reason)
		case key != badKey && status != "sent":
			t.Errorf("message under %q: %s %q, want sent", key, status, errMsg)
		}
	}
	for _, want := range keys {
		if got := bot.ByKey(want); len(got) != 1 || got[0].IdempotencyKey != want || got[0].Body.IdempotencyKey != want {
			t.Errorf("the bot got %d requests under %q (%+v), want one, with the key as stored in the header and the body", len(got), want, got)
		}
	}
	if got := bot.ByKey(badKey); len(got) != 0 {
		t.Errorf("the bot got %d requests under the invalid key, want none", len(got))
	}
}
