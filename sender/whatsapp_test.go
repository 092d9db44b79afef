package sender_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// A fake Cloud API: the recipient's number decides the answer.
func TestProcessorWithTheCloudAPI(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			To       string `json:"to"`
			Type     string `json:"type"`
			Template struct {
				Name string `json:"name"`
			} `json:"template"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		calls[body.To]++
		n := calls[body.To]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case body.Type != "template" || body.Template.Name != "weekly_review_v1" || r.Header.Get("Authorization") != "Bearer tok":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"message":"bad request","code":100}}`))
		case strings.HasSuffix(body.To, "2") && n == 1: // transient once
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"message":"something went wrong","code":131000}}`))
		case strings.HasSuffix(body.To, "3"): // outside the 24-hour window
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"message":"re-engagement message","code":131047}}`))
		default:
			_, _ = w.Write([]byte(`{"messages":[{"id":"wamid.` + body.To + `"}]}`))
		}
	}))
	defer api.Close()
	wa, err := transport.NewWhatsApp(transport.WhatsAppConfig{
		BaseURL: api.URL, PhoneNumberID: "1234567890", AccessToken: "tok",
		Templates: map[string]transport.WhatsAppTemplate{
			sender.KeyWeeklyReview: {Name: "weekly_review_v1", Language: map[string]string{"pt-BR": "pt_BR"}, Params: []string{"count"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	ids := map[string]string{}
	for _, number := range []string{"5511900000001", "5511900000002", "5511900000003"} {
		var id string
		err := pool.QueryRow(context.Background(), `
			INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
			       destination_jid, scheduled_for, idempotency_key)
			VALUES ($1, 'weekly_review', $2, '{"count":"4"}', 'individual', $3, now() - interval '1 minute', $4)
			RETURNING id::text`, user, sender.KeyWeeklyReview, number+"@s.whatsapp.net", number).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids[number] = id
	}

	sum := run(t, pool, sender.ProcessorConfig{Transport: wa, SendInterval: 0, RetryBase: 10 * time.Millisecond})

	ok := rowOf(t, pool, ids["5511900000001"])
	if ok.Status != "sent" || ok.ProviderID == nil || *ok.ProviderID != "wamid.5511900000001" {
		t.Errorf("message 1: %+v, want sent with its wamid stored", ok)
	}
	retried := rowOf(t, pool, ids["5511900000002"])
	if retried.Status != "sent" || retried.RetryCount != 1 {
		t.Errorf("message 2: %+v, want sent after one retry", retried)
	}
	failed := rowOf(t, pool, ids["5511900000003"])
	if failed.Status != "failed" || failed.RetryCount != 0 || failed.Error == nil || !strings.Contains(*failed.Error, "131047") {
		t.Errorf("message 3: %+v, want failed at once with the code", failed)
	}
	if calls["5511900000003"] != 1 {
		t.Errorf("the permanent failure was tried %d times, want once", calls["5511900000003"])
	}
	if sum.Sent != 2 || sum.Failed != 1 || sum.Retried != 1 {
		t.Errorf("summary %+v, want 2 sent, 1 retried, 1 failed", sum)
	}
	for _, e := range []*string{failed.Error} {
		if e != nil && (strings.Contains(*e, "tok") || strings.Contains(*e, "5511900000003")) {
			t.Errorf("stored error %q carries the token or the number", *e)
		}
	}
}
