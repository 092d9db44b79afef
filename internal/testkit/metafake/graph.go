package metafake

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
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
// wamid, counting them by template name. POST
// /{phone-number-id}/marketing_messages (the Marketing Messages API) does
// the same, counted apart (MarketingSent), and answers as Meta documents
// it (contacts, messages[].id, message_status). GET
// /{waba-id}/message_templates (the Message Templates API) lists the
// templates SetTemplates set, two a page (paging.cursors.after), lying on
// demand as the Phone Number node does (AnswerTemplates).
//
// https://developers.facebook.com/docs/graph-api/reference/whats-app-business-account-to-number-current-status/
// https://developers.facebook.com/documentation/business-messaging/whatsapp/marketing-messages/send-marketing-messages
// https://developers.facebook.com/docs/graph-api/reference/whats-app-business-account/message_templates/
type Graph struct {
	Server *httptest.Server
	// PhoneNumberID is the number's id in the paths.
	PhoneNumberID string
	// AccountID is the WhatsApp Business Account's id in the paths.
	AccountID string

	mu     sync.Mutex
	status int
	body   string
	delay  time.Duration
	sent   map[string]int
	reads  atomic.Int64
	pace   throughput // the per-second ceiling of the sends (throughput.go)

	marketing map[string]int // by template name
	to        []string       // every recipient of either endpoint, in order
	answers   []Answer       // every template message accepted, in order

	templates     []TemplateEntry
	tplStatus     int
	tplBody       string // "" : list templates
	tplDelay      time.Duration
	templateReads atomic.Int64
}

// Answer is one template message a send endpoint accepted: the endpoint
// ("messages" or "marketing_messages"), the recipient ("to"), the
// template's name and the wamid Meta answered.
type Answer struct {
	Endpoint, To, Template, ID string
}

// TemplateEntry is one template as the Message Templates API lists it.
type TemplateEntry struct {
	ID, Name, Language, Category, Status string
}

// NewGraph starts a Graph whose number is GREEN, its portfolio's
// messaging limit TIER_2K, until told otherwise; it stops when the test
// ends.
func NewGraph(t testing.TB) *Graph { return NewGraphNumber(t, "106540352242922") }

// NewGraphNumber is NewGraph for the phone number id phoneID: one Graph
// per number of a business portfolio.
func NewGraphNumber(t testing.TB, phoneID string) *Graph {
	g := &Graph{PhoneNumberID: phoneID, AccountID: "102290129340398", status: http.StatusOK,
		sent: map[string]int{}, marketing: map[string]int{}, tplStatus: http.StatusOK}
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

// SetTemplates makes the Message Templates API list templates (and stop
// lying).
func (g *Graph) SetTemplates(templates ...TemplateEntry) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.templates, g.tplStatus, g.tplBody, g.tplDelay = templates, http.StatusOK, "", 0
}

// AnswerTemplates makes the Message Templates API answer status and body
// after delay, whatever it lists.
func (g *Graph) AnswerTemplates(status int, body string, delay time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tplStatus, g.tplBody, g.tplDelay = status, body, delay
}

// TemplateReads counts the Message Templates API's reads (pages).
func (g *Graph) TemplateReads() int64 { return g.templateReads.Load() }

// MarketingSent counts the template messages the Marketing Messages API
// accepted, by template name.
func (g *Graph) MarketingSent() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.marketing)
}

// Recipients are the "to" of every template message accepted by either
// endpoint, in order.
func (g *Graph) Recipients() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.to)
}

// RecipientCounts counts the template messages accepted by either
// endpoint, by recipient ("to").
func (g *Graph) RecipientCounts() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]int{}
	for _, to := range g.to {
		out[to]++
	}
	return out
}

// Answers are the template messages either endpoint accepted, in order,
// with the wamid each was answered.
func (g *Graph) Answers() []Answer {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.answers)
}

// answered records an accepted message's answer and returns its wamid.
func (g *Graph) answered(endpoint, to, template, id string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.answers = append(g.answers, Answer{Endpoint: endpoint, To: to, Template: template, ID: id})
	return id
}

// CloudEnv is the environment (KEY=value) that points queue-process at
// this Graph: the Cloud API transport (whatsapp-cloud) on the database at
// databaseURL, with the templates file templates, the Graph's number and
// a token it accepts. Callers add what else they need (cmdtest.Env).
func (g *Graph) CloudEnv(databaseURL, templates string) []string {
	return []string{"DATABASE_URL=" + databaseURL, "ENGAGEMENT_TRANSPORT=whatsapp-cloud",
		"WHATSAPP_PHONE_NUMBER_ID=" + g.PhoneNumberID, "WHATSAPP_ACCESS_TOKEN=tok",
		"WHATSAPP_TEMPLATES=" + templates, "WHATSAPP_BASE_URL=" + g.Server.URL}
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
		if !wait(r, delay) {
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(onlyFields(body, r.URL.Query().Get("fields"))))
	case r.Method == http.MethodPost && strings.TrimPrefix(r.URL.Path, "/") == g.PhoneNumberID+"/messages":
		if g.pace.refuse(w) {
			return
		}
		name, to, n := g.accept(r, g.sent)
		id := g.answered("messages", to, name, "wamid."+name+"."+itoa(n))
		_, _ = w.Write([]byte(`{"messaging_product":"whatsapp","contacts":[{"input":"` + to + `","wa_id":"` + to +
			`"}],"messages":[{"id":"` + id + `"}]}`))
	case r.Method == http.MethodPost && strings.TrimPrefix(r.URL.Path, "/") == g.PhoneNumberID+"/marketing_messages":
		if g.pace.refuse(w) {
			return
		}
		name, to, n := g.accept(r, g.marketing)
		id := g.answered("marketing_messages", to, name, "wamid.mm."+name+"."+itoa(n))
		_, _ = w.Write([]byte(`{"messaging_product":"whatsapp","contacts":[{"input":"` + to + `","wa_id":"` + to +
			`"}],"messages":[{"id":"` + id + `","message_status":"accepted"}]}`))
	case r.Method == http.MethodGet && strings.TrimPrefix(r.URL.Path, "/") == g.AccountID+"/message_templates":
		g.serveTemplates(w, r)
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

// accept reads a template message, counts it in counts by template name,
// and returns the name, the recipient and the count.
func (g *Graph) accept(r *http.Request, counts map[string]int) (string, string, int) {
	var req struct {
		To       string `json:"to"`
		Template struct {
			Name string `json:"name"`
		} `json:"template"`
	}
	if b, err := readAll(r); err == nil {
		_ = json.Unmarshal([]byte(b), &req)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	counts[req.Template.Name]++
	g.to = append(g.to, req.To)
	return req.Template.Name, req.To, counts[req.Template.Name]
}

// serveTemplates answers the Message Templates API: the page after the
// "after" cursor (page numbers), two templates a page, or the lie set.
func (g *Graph) serveTemplates(w http.ResponseWriter, r *http.Request) {
	g.templateReads.Add(1)
	g.mu.Lock()
	status, body, delay, list := g.tplStatus, g.tplBody, g.tplDelay, slices.Clone(g.templates)
	g.mu.Unlock()
	if !wait(r, delay) {
		return
	}
	if body == "" {
		page, _ := strconv.Atoi(r.URL.Query().Get("after"))
		body = templatesPage(list, page)
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// templatesPage is page (from 0) of list, two a page, in Meta's shape.
func templatesPage(list []TemplateEntry, page int) string {
	var data []string
	for i := page * 2; i < len(list) && i < page*2+2; i++ {
		t := list[i]
		data = append(data, fmt.Sprintf(`{"name":%q,"language":%q,"status":%q,"category":%q,"id":%q}`,
			t.Name, t.Language, cmp.Or(t.Status, "APPROVED"), t.Category, t.ID))
	}
	paging := fmt.Sprintf(`{"cursors":{"before":"%d","after":"%d"}`, page, page+1)
	if (page+1)*2 < len(list) {
		paging += `,"next":"https://graph.facebook.com/v21.0/102290129340398/message_templates?after=` + itoa(page+1) + `"`
	}
	return `{"data":[` + strings.Join(data, ",") + `],"paging":` + paging + `}}`
}

// TemplateCategoryUpdate is a template_category_update webhook body
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/template_category_update),
// triggered at at: completed, the template name in language changed from
// from to to (previous_category, new_category); impending (!completed),
// it will change from its current category from to to at the category
// update time (correct_category to, new_category from,
// category_update_timestamp a day after at).
func TemplateCategoryUpdate(name, language, from, to string, completed bool, at time.Time) []byte {
	value := `{"message_template_id":1689556908129832,"message_template_name":"` + name +
		`","message_template_language":"` + language + `",`
	if completed {
		value += `"previous_category":"` + from + `","new_category":"` + to + `"}`
	} else {
		value += `"correct_category":"` + to + `","new_category":"` + from +
			`","category_update_timestamp":` + itoa(int(at.Add(24*time.Hour).Unix())) + `}`
	}
	return Account("template_category_update", at, value)
}

func readAll(r *http.Request) (string, error) {
	b, err := io.ReadAll(r.Body)
	return string(b), err
}

func itoa(n int) string { return strconv.Itoa(n) }

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

// wait waits delay, a slow answer's; false when the client gave up first.
func wait(r *http.Request, delay time.Duration) bool {
	select {
	case <-time.After(delay):
		return true
	case <-r.Context().Done():
		return false
	}
}
