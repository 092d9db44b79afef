package delivery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// faultTimeout is the webhook's per-request timeout in these tests.
const faultTimeout = 150 * time.Millisecond

const faultSecret = "hook-s3cr3t-7Q"

// attemptState is a message and its ledger row after an attempt.
type attemptState struct {
	fixture.MessageRow
	RetryIn        time.Duration // scheduled_for − the ledger's last attempt (one settle statement: the same now())
	LedgerStatus   string
	LedgerAttempts int
	LedgerError    *string
}

func attemptStateOf(t *testing.T, pool *pgxpool.Pool, id string) attemptState {
	t.Helper()
	m, l := fixture.MessageByID(t, pool, id), fixture.LedgerOf(t, pool, id, "webhook")
	if l == nil {
		t.Fatalf("message %s has no webhook ledger row", id)
	}
	return attemptState{MessageRow: m, RetryIn: m.ScheduledFor.Sub(l.LastAttemptAt),
		LedgerStatus: l.Status, LedgerAttempts: l.Attempts, LedgerError: l.Error}
}

// assertClean fails when an error message carries the secret, the JID (or
// its number) or the message text.
func assertClean(t *testing.T, what string, msg *string, text string) {
	t.Helper()
	if msg == nil {
		return
	}
	for _, leak := range []string{faultSecret, "5511999990000", text} {
		if leak != "" && strings.Contains(*msg, leak) {
			t.Errorf("%s %q contains %q", what, *msg, leak)
		}
	}
}

// assertAttempts checks the requests the bot got for one message: every one
// under the message's own key (header and body), numbered 1, 2, …
func assertAttempts(t *testing.T, reqs []webhooktest.Request, id, key string, want int) {
	t.Helper()
	if len(reqs) != want {
		t.Fatalf("the bot got %d requests for the message, want %d", len(reqs), want)
	}
	for i, r := range reqs {
		if r.IdempotencyKey != key || r.Body.IdempotencyKey != key || r.Body.ID != id {
			t.Errorf("request %d: Idempotency-Key %q, body key %q, id %q; want %q and %q", i+1, r.IdempotencyKey, r.Body.IdempotencyKey, r.Body.ID, key, id)
		}
		if r.Body.Attempt != i+1 {
			t.Errorf("request %d says attempt %d", i+1, r.Body.Attempt)
		}
	}
}

// TestTransportFaultsAreRetriedThenFail drives one message through a bot
// that misbehaves on every request, one processor run per attempt (with a
// one-hour backoff base, each run makes one attempt and leaves the retry
// for later; the test then makes it due). After each failed attempt the
// message is pending with retry_count + 1, rescheduled exactly the backoff
// after the attempt; after the last retry it is failed with retry_count 3.
func TestTransportFaultsAreRetriedThenFail(t *testing.T) {
	t.Parallel()
	const base = time.Hour
	faults := []struct {
		name  string
		fault webhooktest.Fault
	}{
		{"server hangs past the timeout", webhooktest.Hang()},
		{"headers arrive after the timeout", webhooktest.SlowHeaders(4 * faultTimeout)},
		{"connection reset before a response", webhooktest.Reset()},
		{"connection closed before a response", webhooktest.Close()},
		{"connection reset mid-headers", webhooktest.ResetMidHeaders()},
		{"garbage instead of HTTP", webhooktest.Garbage()},
		{"503 with a truncated body", webhooktest.Truncated(503)},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			bot := webhooktest.New(t, f.fault)
			wh, err := transport.NewWebhook(transport.WebhookConfig{URL: bot.URL, Secret: faultSecret, Timeout: faultTimeout})
			if err != nil {
				t.Fatal(err)
			}
			user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), Locale: "en"})
			id := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))

			for attempt := 1; attempt <= delivery.DefaultMaxRetries+1; attempt++ {
				if attempt > 1 { // the backoff has passed: the retry is due
					fixture.SetMessages(t, pool, fixture.MessageChange{ID: id, ScheduledFor: time.Now().Add(-time.Second)})
				}
				start := time.Now()
				sum := run(t, pool, delivery.ProcessorConfig{Transport: wh, SendInterval: -1, RetryBase: base})
				if took := time.Since(start); took > 10*faultTimeout+2*time.Second {
					t.Errorf("attempt %d took %s: the timeout does not bound it", attempt, took)
				}
				s := attemptStateOf(t, pool, id)
				reqs := bot.ByKey(s.Key())
				assertAttempts(t, reqs, id, s.Key(), attempt)
				text := reqs[0].Body.Text
				if text == "" {
					t.Fatal("the request carried no text")
				}
				assertClean(t, "error_message", s.ErrorMessage, text)
				assertClean(t, "ledger error", s.LedgerError, text)
				if s.ErrorMessage == nil || *s.ErrorMessage == "" || s.LedgerError == nil || *s.LedgerError != *s.ErrorMessage {
					t.Errorf("attempt %d: error_message %v, ledger error %v; want the same error in both", attempt, s.ErrorMessage, s.LedgerError)
				}
				if s.LedgerAttempts != attempt || s.LedgerStatus != "failed" {
					t.Errorf("attempt %d: ledger %s after %d attempts, want failed after %d", attempt, s.LedgerStatus, s.LedgerAttempts, attempt)
				}
				if attempt <= delivery.DefaultMaxRetries {
					wantIn := base << (attempt - 1)
					if s.Status != "pending" || s.RetryCount != attempt || s.RetryIn != wantIn || s.SentAt != nil {
						t.Errorf("after attempt %d: %s, retry_count %d, rescheduled %s after the attempt; want pending, %d, %s",
							attempt, s.Status, s.RetryCount, s.RetryIn, attempt, wantIn)
					}
					if sum.Retried != 1 || sum.Failed != 0 || sum.Sent != 0 {
						t.Errorf("attempt %d: summary %+v, want one retried", attempt, sum)
					}
				} else {
					if s.Status != "failed" || s.RetryCount != delivery.DefaultMaxRetries || s.SentAt != nil {
						t.Errorf("after the last retry: %s with retry_count %d, want failed with %d", s.Status, s.RetryCount, delivery.DefaultMaxRetries)
					}
					if sum.Failed != 1 || sum.Retried != 0 {
						t.Errorf("last attempt: summary %+v, want one failed", sum)
					}
				}
				if n := fixture.CountMessages(t, pool, fixture.Messages{Status: "processing"}); n != 0 {
					t.Errorf("%d messages left processing after the run", n)
				}
			}
		})
	}
}

// TestAnsweredWith2xxIsDelivered: a 2xx is delivered however the rest of
// the response goes — a body that never comes in time, is cut short or is
// junk loses only the provider message id. Sending it again would deliver
// it twice.
func TestAnsweredWith2xxIsDelivered(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	bot := webhooktest.New(t)
	wh, err := transport.NewWebhook(transport.WebhookConfig{URL: bot.URL, Timeout: faultTimeout})
	if err != nil {
		t.Fatal(err)
	}
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	faults := map[string]webhooktest.Fault{
		"body after the timeout":       webhooktest.SlowBody200(4 * faultTimeout),
		"body shorter than its length": webhooktest.Truncated(200),
		"junk body, short length":      webhooktest.Junk200(),
	}
	ids := map[string]string{}
	for name, f := range faults {
		id := queue(t, pool, user, fixture.Goodbye.CatalogKey, "pending", time.Now().Add(-time.Minute))
		ids[name] = id
		bot.Script(fixture.MessageByID(t, pool, id).Key(), f)
	}

	sum := run(t, pool, delivery.ProcessorConfig{Transport: wh, SendInterval: -1, RetryBase: 10 * time.Millisecond})

	if sum.Sent != len(faults) || sum.Retried != 0 || sum.Failed != 0 {
		t.Errorf("summary %+v, want all %d sent at the first attempt", sum, len(faults))
	}
	for name, id := range ids {
		s := attemptStateOf(t, pool, id)
		assertAttempts(t, bot.ByKey(s.Key()), id, s.Key(), 1)
		if s.Status != "sent" || s.SentAt == nil || s.RetryCount != 0 || s.LedgerStatus != "sent" || s.LedgerAttempts != 1 || s.ErrorMessage != nil {
			t.Errorf("%s: %+v, want sent once, ledger sent after 1 attempt", name, s)
		}
		if s.ProviderMessageID != nil {
			t.Errorf("%s: provider_message_id %q from a body that was not whole", name, *s.ProviderMessageID)
		}
	}
}
