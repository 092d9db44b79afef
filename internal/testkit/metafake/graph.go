package metafake

import (
	"encoding/json"
	"io"
	"maps"
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
// Number node (GET /{phone-number-id}?fields=…) answers the fields asked
// for of what the test sets
// (SetNumber, or one field at a time with SetField),
// lying on demand (a body that is not JSON, fields of the wrong type or
// missing, a 500, an answer slower than a client waits), and
// POST /{phone-number-id}/messages accepts every template message with a
// wamid, counting them by template name and by recipient ("to").
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
	to     map[string]int
	reads  atomic.Int64
}

// NewGraph starts a Graph whose number is GREEN, its portfolio's
// messaging limit TIER_2K, until told otherwise; it stops when the test
// ends.
func NewGraph(t testing.TB) *Graph { return NewGraphNumber(t, "106540352242922") }

// NewGraphNumber is NewGraph for the phone number id phoneID: one Graph
// per number of a business portfolio.
func NewGraphNumber(t testing.TB, phoneID string) *Graph {
	g := &Graph{PhoneNumberID: phoneID, status: http.StatusOK, sent: map[string]int{}, to: map[string]int{}}
	g.SetNumber(`{"quality_rating":"GREEN","whatsapp_business_manager_messaging_limit":"TIER_2K","status":"CONNECTED","id":"` + phoneID + `"}`)
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(func() {
		g.Server.CloseClientConnections()
		g.Server.Close()
	})
	return g
}

// PhoneNumber is the Phone Number node's answer with a quality rating,
// the business portfolio's messaging limit as a tier word
// (whatsapp_business_manager_messaging_limit; messaging_limit_tier is
// deprecated:
// https://developers.facebook.com/documentation/business-messaging/whatsapp/messaging-limits)
// and a status, as Meta sends it.
func PhoneNumber(rating, tier, status string) string {
	return `{"verified_name":"Engagement","display_phone_number":"+55 11 99999-0000","quality_rating":"` + rating +
		`","whatsapp_business_manager_messaging_limit":"` + tier + `","status":"` + status + `","id":"106540352242922"}`
}

// SetField sets one field of the Phone Number node's answer to the raw
// JSON value (a lie too: "12", "[\"TIER_2K\"]"), or drops it when raw is
// empty; the status and delay stay. The answer must be a JSON object.
func (g *Graph) SetField(name, raw string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(g.body), &fields); err != nil || fields == nil {
		panic("metafake: SetField on an answer that is not a JSON object")
	}
	if raw == "" {
		delete(fields, name)
	} else {
		fields[name] = json.RawMessage(raw)
	}
	b, err := json.Marshal(fields)
	if err != nil {
		panic("metafake: SetField: " + err.Error())
	}
	g.body = string(b)
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

// Recipients counts the template messages accepted, by recipient ("to").
func (g *Graph) Recipients() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.to)
}

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
		_, _ = w.Write([]byte(onlyFields(body, r.URL.Query().Get("fields"))))
	case r.Method == http.MethodPost && strings.TrimPrefix(r.URL.Path, "/") == g.PhoneNumberID+"/messages":
		var name, to string
		if b, err := readAll(r); err == nil {
			if i := strings.Index(b, `"name":"`); i >= 0 {
				name = b[i+8:]
				name = name[:strings.IndexByte(name, '"')]
			}
			var msg struct {
				To string `json:"to"`
			}
			_ = json.Unmarshal([]byte(b), &msg)
			to = msg.To
		}
		g.mu.Lock()
		g.to[to]++
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

// onlyFields is body with only the fields asked for (and id), as the Graph
// API answers a ?fields= request; a body that is not a JSON object, or no
// fields asked, is body as it is.
func onlyFields(body, fields string) string {
	var all map[string]json.RawMessage
	if fields == "" || json.Unmarshal([]byte(body), &all) != nil || all == nil {
		return body
	}
	out := map[string]json.RawMessage{}
	for _, name := range append(strings.Split(fields, ","), "id") {
		if v, ok := all[name]; ok {
			out[name] = v
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func readAll(r *http.Request) (string, error) {
	b, err := io.ReadAll(r.Body)
	return string(b), err
}

func itoa(n int) string { return strconv.Itoa(n) }
