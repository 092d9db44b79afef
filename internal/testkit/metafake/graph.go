package metafake

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Graph is a fake of Meta's Graph API for one phone number: the Phone
// Number node (GET /{phone-number-id}?fields=…) answers what the test sets,
// lying on demand (a body that is not JSON, fields of the wrong type or
// missing, a 500, an answer slower than a client waits), and
// POST /{phone-number-id}/messages accepts every template message with a
// wamid, counting them by template name.
//
// https://developers.facebook.com/docs/graph-api/reference/whats-app-business-account-to-number-current-status/
type Graph struct {
	Server *httptest.Server
	// PhoneNumberID is the number's id in the paths.
	PhoneNumberID string

	mu     sync.Mutex
	status int
	body   string
	delay  time.Duration
	sent   map[string]int
	reads  atomic.Int64
	pace   throughput // the per-second ceiling of the sends (throughput.go)
}

// NewGraph starts a Graph whose number is GREEN at TIER_2K until told
// otherwise; it stops when the test ends.
func NewGraph(t testing.TB) *Graph {
	g := &Graph{PhoneNumberID: "106540352242922", status: http.StatusOK, sent: map[string]int{}}
	g.SetNumber(`{"quality_rating":"GREEN","messaging_limit_tier":"TIER_2K","status":"CONNECTED","id":"106540352242922"}`)
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(func() {
		g.Server.CloseClientConnections()
		g.Server.Close()
	})
	return g
}

// PhoneNumber is the Phone Number node's answer with a quality rating,
// a messaging limit tier and a status, as Meta sends it.
func PhoneNumber(rating, tier, status string) string {
	return `{"verified_name":"Engagement","display_phone_number":"+55 11 99999-0000","quality_rating":"` + rating +
		`","messaging_limit_tier":"` + tier + `","status":"` + status + `","id":"106540352242922"}`
}

// SetNumber makes the Phone Number node answer body with 200.
func (g *Graph) SetNumber(body string) { g.Answer(http.StatusOK, body, 0) }

// Answer makes the Phone Number node answer status and body after delay.
func (g *Graph) Answer(status int, body string, delay time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.status, g.body, g.delay = status, body, delay
}

// Reads counts the Phone Number node's reads.
func (g *Graph) Reads() int64 { return g.reads.Load() }

// Sent counts the template messages accepted, by template name.
func (g *Graph) Sent() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]int{}
	for k, v := range g.sent {
		out[k] = v
	}
	return out
}

func (g *Graph) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && strings.TrimPrefix(r.URL.Path, "/") == g.PhoneNumberID:
		g.reads.Add(1)
		g.mu.Lock()
		status, body, delay := g.status, g.body, g.delay
		g.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	case r.Method == http.MethodPost && strings.TrimPrefix(r.URL.Path, "/") == g.PhoneNumberID+"/messages":
		if g.pace.refuse(w) {
			return
		}
		var name string
		if b, err := readAll(r); err == nil {
			if i := strings.Index(b, `"name":"`); i >= 0 {
				name = b[i+8:]
				name = name[:strings.IndexByte(name, '"')]
			}
		}
		g.mu.Lock()
		g.sent[name]++
		n := g.sent[name]
		g.mu.Unlock()
		_, _ = w.Write([]byte(`{"messaging_product":"whatsapp","messages":[{"id":"wamid.` + name + "." + itoa(n) + `"}]}`))
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"message":"Unknown path","code":100}}`))
	}
}

// TemplateStatus is a message_template_status_update webhook body: Meta
// changed the template name's status to event (APPROVED, PAUSED,
// DISABLED, REINSTATED, …) at at (the entry's time, Unix seconds).
// https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/message_template_status_update/
func TemplateStatus(name, event string, at time.Time) []byte {
	return []byte(`{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","time":` + itoa(int(at.Unix())) + `,"changes":[{"value":{
		"event":"` + event + `","message_template_id":1689556908129832,"message_template_name":"` + name + `",
		"message_template_language":"pt_BR","reason":"NONE","message_template_category":"MARKETING"},
		"field":"message_template_status_update"}]}]}`)
}

// QualityUpdate is a phone_number_quality_update webhook body: event
// (UPGRADE, DOWNGRADE, FLAGGED, UNFLAGGED, THROUGHPUT_UPGRADE, …) at at,
// the business portfolio's messaging limit now limit (TIER_250, TIER_2K,
// …), in both the current field (max_daily_conversations_per_business)
// and the one Meta retires (current_limit).
// https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/phone_number_quality_update/
func QualityUpdate(event, limit string, at time.Time) []byte {
	return Account("phone_number_quality_update", at, `{"display_phone_number":"15550783881","event":"`+event+
		`","current_limit":"`+limit+`","max_daily_conversations_per_business":"`+limit+`"}`)
}

// Account is a WhatsApp Business Account webhook body with one change of
// field whose value is the raw JSON value, triggered at at: for values
// Meta never documented.
func Account(field string, at time.Time, value string) []byte {
	return []byte(`{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","time":` + itoa(int(at.Unix())) +
		`,"changes":[{"value":` + value + `,"field":"` + field + `"}]}]}`)
}

func readAll(r *http.Request) (string, error) {
	b, err := io.ReadAll(r.Body)
	return string(b), err
}

func itoa(n int) string { return strconv.Itoa(n) }
