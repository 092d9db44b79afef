package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 55, finding 1: Meta posts a message's statuses within milliseconds
// of answering the API call, often before queue-process has recorded its
// wamid, and engagement_receipt dropped them (250 of 250 posted before the
// answer were lost). Here Meta's fake posts every status, signed, to the
// shipped console before it answers the shipped queue-process: sent and
// delivered for each message, and for every fifth a late failure
// (131026) instead. Every one lands once the send is recorded.
func TestStatusesMetaPostsBeforeItAnswersAreKept(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.NewPool(t)
	c := startConsole(t, cmdtest.Build(t, "./cmd/engagement-console"), dbURL,
		"--whatsapp-app-secret", appSecret, "--whatsapp-verify-token", verifyToken)
	hook := c.base + "/webhooks/whatsapp"
	post := func(body []byte) {
		req, _ := http.NewRequest(http.MethodPost, hook, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Hub-Signature-256", metafake.Sign(appSecret, body))
		res, err := c.client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("the console answered a signed status %d", res.StatusCode)
		}
	}

	// Meta: the Graph fake, in front of which every accepted message's
	// statuses are posted before the answer goes back.
	g := metafake.NewGraph(t)
	target, _ := url.Parse(g.Server.URL)
	var sends atomic.Int64
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "messages") { // /messages and /marketing_messages
			httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(rec, r)
		var answer struct {
			Messages []struct{ ID string } `json:"messages"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err == nil && len(answer.Messages) == 1 {
			wamid, now := answer.Messages[0].ID, time.Now().Truncate(time.Second)
			if sends.Add(1)%5 == 0 {
				post(metafake.Statuses(metafake.Status(wamid, "sent", now, ""), metafake.Status(wamid, "failed", now, "131026")))
			} else {
				post(metafake.Statuses(metafake.Status(wamid, "sent", now, ""), metafake.Status(wamid, "delivered", now, "")))
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(meta.Close)

	const n = 20
	fixture.DueToRecipients(t, pool, n, "early-")
	templates := filepath.Join(t.TempDir(), "templates.json")
	if err := os.WriteFile(templates, []byte(`{"engagement.weekly_review.celebration": {"name": "weekly_review_v1",
		"language": {"pt-BR": "pt_BR", "en": "en_US"}, "params": ["count"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	res := cmdtest.Run(t, cmdtest.Build(t, "./cmd/queue-process"), cmdtest.Env("DATABASE_URL="+dbURL),
		"--transport", "whatsapp-cloud", "--whatsapp-base-url", meta.URL, "--whatsapp-phone-number-id", g.PhoneNumberID,
		"--whatsapp-token", "tok", "--whatsapp-templates", templates, "--send-interval", "0", "--output", "json")
	if res.Code != 0 {
		t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
	}
	var delivered, failed int
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{}) {
		switch {
		case m.IdempotencyKey == nil || !strings.HasPrefix(*m.IdempotencyKey, "early-"):
		case m.Status == "sent" && m.DeliveredAt != nil:
			delivered++
		case m.Status == "failed" && m.ErrorMessage != nil && strings.Contains(*m.ErrorMessage, "131026"):
			failed++
		}
	}
	kept := fixture.KeptReceipts(t, pool, "", "")
	if sends.Load() != n || delivered != n-n/5 || failed != n/5 || kept != 0 {
		t.Errorf("of %d messages Meta accepted and reported before answering, %d are delivered and %d failed with 131026, "+
			"%d receipts still kept; want %d, %d, 0", sends.Load(), delivered, failed, kept, n-n/5, n/5)
	}
}
