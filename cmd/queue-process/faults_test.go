package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
)

// TestTransportFaultsEndToEnd runs the binary once against a bot that
// misbehaves differently for each message, and checks every message's
// outcome in the database, the ledger, the requests the bot saw, the
// summary and the log.
func TestTransportFaultsEndToEnd(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	const secret = "e2e-hook-s3cr3t"
	bot := webhooktest.New(t)
	ok := webhooktest.OK()

	type want struct {
		status   string
		retries  int // retry_count at exit
		requests int
		// minRetryIn > 0: pending, rescheduled at least this long after the
		// last attempt; minGap > 0: the attempts were at least this far apart.
		minRetryIn, minGap time.Duration
	}
	scripts := []struct {
		name   string
		script []webhooktest.Fault
		want   want
	}{
		{"reset, then delivered", []webhooktest.Fault{webhooktest.Reset(), ok}, want{"sent", 1, 2, 0, 0}},
		{"closed, then delivered", []webhooktest.Fault{webhooktest.Close(), ok}, want{"sent", 1, 2, 0, 0}},
		{"reset mid-headers, then delivered", []webhooktest.Fault{webhooktest.ResetMidHeaders(), ok}, want{"sent", 1, 2, 0, 0}},
		{"garbage, then delivered", []webhooktest.Fault{webhooktest.Garbage(), ok}, want{"sent", 1, 2, 0, 0}},
		{"truncated 503, then delivered", []webhooktest.Fault{webhooktest.Truncated(503), ok}, want{"sent", 1, 2, 0, 0}},
		{"always reset", []webhooktest.Fault{webhooktest.Reset()}, want{"failed", 3, 4, 0, 0}},
		{"always garbage", []webhooktest.Fault{webhooktest.Garbage()}, want{"failed", 3, 4, 0, 0}},
		{"429 Retry-After 1, then delivered", []webhooktest.Fault{webhooktest.Status(429, "", webhooktest.RetryAfter(1)), ok}, want{"sent", 1, 2, 0, time.Second}},
		{"429 Retry-After an hour", []webhooktest.Fault{webhooktest.Status(429, `{"error":"slow down"}`, webhooktest.RetryAfter(3600))}, want{"pending", 1, 1, time.Hour, 0}},
		{"422 echoing the JID and text", []webhooktest.Fault{webhooktest.Echo422()}, want{"failed", 0, 1, 0, 0}},
		{"200, body cut short", []webhooktest.Fault{webhooktest.Truncated(200)}, want{"sent", 0, 1, 0, 0}},
		{"200, junk body", []webhooktest.Fault{webhooktest.Junk200()}, want{"sent", 0, 1, 0, 0}},
	}
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), Locale: "en"})
	ids := make([]string, len(scripts))
	keys := make([]string, len(scripts))
	for i, s := range scripts {
		keys[i] = user + ":weekly_review:fault-" + string(rune('a'+i))
		ids[i] = fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey,
			Params: `{"count":"2"}`, JID: "5511999990000@s.whatsapp.net", ScheduledFor: time.Now().Add(-time.Minute), Key: keys[i]})
		bot.Script(keys[i], s.script...)
	}

	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.URL, "ENGAGEMENT_WEBHOOK_SECRET="+secret)
	start := time.Now()
	res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0", "--retry-base", "20ms", "--output", "json")
	if res.Code != 0 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("the run took %s; the longest wait it should make is the 1 s Retry-After", took)
	}

	var sum struct{ Processed, Sent, Retried, Failed int }
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v: %q", err, res.Stdout)
	}
	var wantSum struct{ Processed, Sent, Retried, Failed int }
	for _, s := range scripts {
		wantSum.Processed += s.want.requests
		switch {
		case s.want.status == "sent":
			wantSum.Sent++
		case s.want.status == "failed":
			wantSum.Failed++
		}
		wantSum.Retried += s.want.retries
	}
	if sum != wantSum {
		t.Errorf("summary %+v, want %+v", sum, wantSum)
	}

	var text string
	for i, s := range scripts {
		t.Run(s.name, func(t *testing.T) {
			var (
				status, key, ledgerStatus string
				retries, ledgerAttempts   int
				errMsg, ledgerErr         *string
				sentAt                    *time.Time
				retryIn                   time.Duration
			)
			m, l := fixture.MessageByID(t, pool, ids[i]), fixture.LedgerOf(t, pool, ids[i], "")
			if l == nil {
				t.Fatalf("message %s has no ledger row", ids[i])
			}
			status, retries, key, errMsg, sentAt = m.Status, m.RetryCount, m.Key(), m.ErrorMessage, m.SentAt
			retryIn, ledgerStatus, ledgerAttempts, ledgerErr = m.ScheduledFor.Sub(l.LastAttemptAt), l.Status, l.Attempts, l.Error
			if status != s.want.status || retries != s.want.retries {
				t.Errorf("%s with retry_count %d, want %s with %d", status, retries, s.want.status, s.want.retries)
			}
			// The ledger agrees: one attempt per request, the last outcome.
			wantLedger := map[string]string{"sent": "sent", "failed": "failed", "pending": "failed"}[s.want.status]
			if ledgerStatus != wantLedger || ledgerAttempts != s.want.requests {
				t.Errorf("ledger %s after %d attempts, want %s after %d", ledgerStatus, ledgerAttempts, wantLedger, s.want.requests)
			}
			if (status == "sent") != (sentAt != nil) {
				t.Errorf("status %s with sent_at %v", status, sentAt)
			}
			if status != "sent" && (errMsg == nil || *errMsg == "") {
				t.Error("no error_message on a message that was not delivered")
			}
			if s.want.minRetryIn > 0 && retryIn < s.want.minRetryIn {
				t.Errorf("rescheduled %s after the attempt, want at least the Retry-After %s", retryIn, s.want.minRetryIn)
			}
			reqs := bot.ByKey(key)
			if len(reqs) != s.want.requests {
				t.Fatalf("the bot got %d requests, want %d", len(reqs), s.want.requests)
			}
			for j, r := range reqs {
				if r.IdempotencyKey != keys[i] || r.Body.IdempotencyKey != keys[i] || r.Body.ID != ids[i] || r.Body.Attempt != j+1 {
					t.Errorf("request %d: key %q (body %q), id %q, attempt %d; want key %q, id %q, attempt %d",
						j+1, r.IdempotencyKey, r.Body.IdempotencyKey, r.Body.ID, r.Body.Attempt, keys[i], ids[i], j+1)
				}
				if j > 0 && s.want.minGap > 0 && r.At.Sub(reqs[j-1].At) < s.want.minGap {
					t.Errorf("attempt %d came %s after the previous, before the Retry-After %s", j+1, r.At.Sub(reqs[j-1].At), s.want.minGap)
				}
				text = r.Body.Text
			}
			for _, e := range []*string{errMsg, ledgerErr} {
				for _, leak := range []string{secret, "5511999990000", text} {
					if e != nil && leak != "" && strings.Contains(*e, leak) {
						t.Errorf("error %q contains %q", *e, leak)
					}
				}
			}
		})
	}

	// Never two keys for one message, nor one key for two messages.
	keyOf, idOf := map[string]string{}, map[string]string{}
	for _, r := range bot.Requests() {
		if k, seen := keyOf[r.Body.ID]; seen && k != r.IdempotencyKey {
			t.Errorf("message %s sent under keys %q and %q", r.Body.ID, k, r.IdempotencyKey)
		}
		if id, seen := idOf[r.IdempotencyKey]; seen && id != r.Body.ID {
			t.Errorf("key %q used for messages %s and %s", r.IdempotencyKey, id, r.Body.ID)
		}
		keyOf[r.Body.ID], idOf[r.IdempotencyKey] = r.IdempotencyKey, r.Body.ID
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "processing"}); n != 0 {
		t.Errorf("%d messages left processing at exit", n)
	}
	if n := fixture.CountLedger(t, pool, fixture.LedgerRows{Status: "processing"}); n != 0 {
		t.Errorf("%d ledger rows left processing at exit", n)
	}
	for _, leak := range []string{secret, "5511999990000", text, "goroutine", "panic"} {
		if text != "" && strings.Contains(res.Stderr, leak) {
			t.Errorf("the log contains %q", leak)
		}
	}
	if text == "" {
		t.Error("the bot saw no message text")
	}
}
