package delivery_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
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
		case strings.HasSuffix(body.To, "2") && n == 1: // throttled once: Meta did not take it
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"throughput reached","code":130429}}`))
		case strings.HasSuffix(body.To, "4"): // a server fault: Meta may have taken it
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
			fixture.WeeklyReview.CatalogKey: {Name: "weekly_review_v1", Language: map[string]string{"pt-BR": "pt_BR"}, Params: []string{"count"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	ids := map[string]string{}
	for _, number := range []string{"5511900000001", "5511900000002", "5511900000003", "5511900000004"} {
		id := fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey,
			Params: `{"count":"4"}`, JID: number + "@s.whatsapp.net", ScheduledFor: time.Now().Add(-time.Minute), Key: number})
		ids[number] = id
	}

	sum := run(t, pool, delivery.ProcessorConfig{Transport: wa, SendInterval: -1, RetryBase: 10 * time.Millisecond})

	ok := rowOf(t, pool, ids["5511900000001"])
	if ok.Status != "sent" || ok.ProviderMessageID == nil || *ok.ProviderMessageID != "wamid.5511900000001" {
		t.Errorf("message 1: %+v, want sent with its wamid stored", ok)
	}
	// 130429 is the number over its throughput, not the message's fault:
	// it goes again after the pause, its retry unspent (issue 57).
	retried := rowOf(t, pool, ids["5511900000002"])
	if retried.Status != "sent" || retried.RetryCount != 0 {
		t.Errorf("message 2: %+v, want sent after a retry that spent none", retried)
	}
	failed := rowOf(t, pool, ids["5511900000003"])
	if failed.Status != "failed" || failed.RetryCount != 0 || failed.ErrorMessage == nil || !strings.Contains(*failed.ErrorMessage, "131047") {
		t.Errorf("message 3: %+v, want failed at once with the code", failed)
	}
	if calls["5511900000003"] != 1 {
		t.Errorf("the permanent failure was tried %d times, want once", calls["5511900000003"])
	}
	// A 500 after Meta read the request is an outcome unknown, like a
	// crash mid-send: failed, never sent again (issue 22, point 4).
	unknown := rowOf(t, pool, ids["5511900000004"])
	if unknown.Status != "failed" || unknown.ErrorMessage == nil || !strings.Contains(*unknown.ErrorMessage, delivery.ErrOutcomeUnknown.Error()) {
		t.Errorf("message 4: %+v, want failed as outcome unknown", unknown)
	}
	for number, want := range map[string]bool{"5511900000003": false, "5511900000004": true} {
		if got := fixture.Deref(fixture.MessageByID(t, pool, ids[number]).InDoubt); got != want {
			t.Errorf("message %s: in_doubt %v, want %v", number, got, want)
		}
	}
	if calls["5511900000004"] != 1 {
		t.Errorf("the 500 was sent %d times, want once", calls["5511900000004"])
	}
	if sum.Sent != 2 || sum.Failed != 2 || sum.Retried != 1 {
		t.Errorf("summary %+v, want 2 sent, 1 retried, 2 failed", sum)
	}
	for _, e := range []*string{failed.ErrorMessage} {
		if e != nil && (strings.Contains(*e, "tok") || strings.Contains(*e, "5511900000003")) {
			t.Errorf("stored error %q carries the token or the number", *e)
		}
	}
}

// A Cloud API 5xx is an unknown outcome: failed after one request, unless
// the operator chose RetryUnknown (--whatsapp-retry-unknown), which spends
// the ordinary retry budget on it.
func TestRetryUnknownIsTheOperatorsChoice(t *testing.T) {
	t.Parallel()
	for _, retry := range []bool{false, true} {
		t.Run(fmt.Sprintf("RetryUnknown=%v", retry), func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			var calls atomic.Int32
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet { // the run's read of the number's health, not a send
					w.WriteHeader(http.StatusNotFound)
					return
				}
				calls.Add(1)
				w.WriteHeader(http.StatusInternalServerError)
			}))
			defer api.Close()
			wa, err := transport.NewWhatsApp(transport.WhatsAppConfig{
				BaseURL: api.URL, PhoneNumberID: "1234567890", AccessToken: "tok",
				Templates: map[string]transport.WhatsAppTemplate{fixture.WeeklyReview.CatalogKey: {Name: "weekly_review_v1", Language: map[string]string{"pt-BR": "pt_BR"}, Params: []string{"count"}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
			id := queue(t, pool, user, fixture.WeeklyReview.CatalogKey, "pending", time.Now().Add(-time.Minute))

			run(t, pool, delivery.ProcessorConfig{Transport: wa, SendInterval: -1, RetryBase: time.Millisecond, RetryUnknown: retry})

			r := rowOf(t, pool, id)
			wantCalls, wantRetries := int32(1), 0
			if retry {
				wantCalls, wantRetries = 4, 3
			}
			if calls.Load() != wantCalls || r.Status != "failed" || r.RetryCount != wantRetries {
				t.Errorf("%d requests, message %+v; want %d requests, failed with %d retries", calls.Load(), r, wantCalls, wantRetries)
			}
			unknown := r.ErrorMessage != nil && strings.Contains(*r.ErrorMessage, delivery.ErrOutcomeUnknown.Error())
			if unknown == retry {
				t.Errorf("error %v: outcome unknown %v, want %v", r.ErrorMessage, unknown, !retry)
			}
		})
	}
}
