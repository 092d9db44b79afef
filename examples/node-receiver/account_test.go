package receiver_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 58: when the bot's WhatsApp account is refused (logged out,
// banned, rate-limited), the reference receiver answers the contract's
// account answer (docs/receiver.md), not a 503 per message: server.js's
// send throws the error the real @whiskeysockets/baileys builds
// (SEND_ERROR), over real HTTP. The first request is answered from what
// send threw; the next is answered before anything is sent. Neither the
// JID nor the text reaches its log.
func TestTheReferenceReceiverAnswersBaileysAccountRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sendError, accountError string
		status, retryAfterS     int
	}{
		{"loggedOut", "logged_out", http.StatusUnauthorized, 3600},
		{"forbidden", "banned", http.StatusForbidden, 24 * 3600},
		{"rate-overlimit", "rate_overlimit", http.StatusTooManyRequests, 3600},
	} {
		t.Run(tc.sendError, func(t *testing.T) {
			t.Parallel()
			r := startReceiver(t, "SEND_ERROR="+tc.sendError)
			for i := 1; i <= 2; i++ {
				status, body := postSigned(t, r.url, fmt.Sprintf("%s:k%d", tc.sendError, i))
				var got struct {
					AccountError string `json:"account_error"`
					RetryAfterS  int    `json:"retry_after_s"`
				}
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatalf("request %d: HTTP %d, body %q: %v", i, status, body, err)
				}
				if status != tc.status || got.AccountError != tc.accountError || got.RetryAfterS < tc.retryAfterS-5 || got.RetryAfterS > tc.retryAfterS {
					t.Errorf("request %d: HTTP %d %+v; want %d {account_error: %s, retry_after_s: about %d}",
						i, status, got, tc.status, tc.accountError, tc.retryAfterS)
				}
			}
			if sent := lines(t, r.sendLog); len(sent) != 0 {
				t.Errorf("sent despite the refusal: %v", sent)
			}
			if log := r.logged(); strings.Contains(log, testJID) || strings.Contains(log, "5511987654321") || strings.Contains(log, testText) {
				t.Errorf("the JID or the text reached the receiver's log:\n%s", log)
			}
		})
	}
}

const (
	testJID  = "5511987654321@s.whatsapp.net"
	testText = "Oi, Maria! Sentimos sua falta."
)

// postSigned delivers one message to url as queue-process does: signed,
// under key. It returns the status and the body of the answer.
func postSigned(t *testing.T, url, key string) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"id": key, "message_type": "goodbye", "text": testText,
		"destination": "individual", "destination_jid": testJID, "idempotency_key": key, "attempt": 1})
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Engagement-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// The shipped queue-process against the reference receiver whose send
// throws Baileys' loggedOut error: nothing reaches WhatsApp and no
// message is recorded sent. That the run stops at the first account
// answer and the messages wait is queue-process's pause (issue 58), tested
// where it is built.
func TestQueueProcessAgainstALoggedOutReferenceReceiverSendsNothing(t *testing.T) {
	t.Parallel()
	r := startReceiver(t, "SEND_ERROR=loggedOut")
	pool, url := pgtest.NewPool(t)
	queue(t, pool, 5)
	bin := cmdtest.Build(t, "./cmd/queue-process")
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+r.url,
		"ENGAGEMENT_WEBHOOK_SECRET="+secret)
	// The first run stops at the receiver's first answer (issue 58: the
	// account pause), exit 0, saying why; the second, within the pause,
	// asks the receiver nothing.
	for run := 1; run <= 2; run++ {
		res := cmdtest.Run(t, bin, env, "--send-interval", "0", "--workers", "1", "--output", "json")
		var sum struct {
			Stopped string `json:"stopped"`
			Pause   struct {
				Kind string `json:"kind"`
			} `json:"pause"`
		}
		if err := json.Unmarshal([]byte(res.Stdout), &sum); res.Code != 0 || err != nil ||
			sum.Stopped != "account_paused" || sum.Pause.Kind != "logged_out" {
			t.Fatalf("run %d: exit %d, summary %+v (%v); want 0, stopped account_paused, logged_out: %s",
				run, res.Code, sum, err, res.Stderr)
		}
		// The receiver logs its answer before it writes it; its log reaches
		// the test through a pipe, a moment later.
		n := 0
		for deadline := time.Now().Add(10 * time.Second); n == 0 && time.Now().Before(deadline); {
			if n = strings.Count(r.logged(), "account logged_out"); n == 0 {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if n != 1 {
			t.Errorf("after run %d the receiver answered logged_out %d times; want once, at the first run's first request", run, n)
		}
	}
	if sent := lines(t, r.sendLog); len(sent) != 0 {
		t.Errorf("reached WhatsApp while logged out: %v", sent)
	}
	waiting := 0
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Status: "pending"}) {
		if m.RetryCount == 0 {
			waiting++
		}
	}
	if waiting != 5 {
		t.Errorf("%d of the 5 messages wait, pending with no retry spent; want all 5", waiting)
	}
}
