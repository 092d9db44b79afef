package console_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender"
)

// binaryPool is a fresh migrated database's pool, opened the way
// engagement-console opens its own (pgtest.NewPool: postgres.Open, pgx's
// exec mode), so a test runs the code operators get: a []byte sent to a
// jsonb column fails there and nowhere else.
func binaryPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	return pool
}

// logBuffer collects a console's log lines, safe for its concurrent
// requests.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveLogged is serve over pool with the console's log, at debug level,
// kept in the returned buffer.
func serveLogged(t *testing.T, pool *pgxpool.Pool) (*httptest.Server, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	h, err := console.New(console.Config{
		Pool:   pool,
		Auth:   console.Auth{Users: htpasswd(t), Operators: []string{operator}},
		Logger: zerolog.New(logs).Level(zerolog.DebugLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	return httptestServer(t, h), logs
}

// apiPost posts body to path as user with the given content type and
// headers (name, value pairs).
func apiPost(t *testing.T, srv *httptest.Server, user, password, contentType, body string, headers ...string) (reply, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, password)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	return do(t, srv, req)
}

// TestEnqueueAPI: POST /api/messages queues as engagementctl enqueue does,
// through the pool the binary opens: 201 and the message for a new one,
// 200 and the same message for a replay of its key, 400 when header and
// body disagree, 403 for a viewer, 415 for a body that is not JSON; an
// audit row for each new message, with the reason.
func TestEnqueueAPI(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	srv, logs := serveLogged(t, pool)
	jid := "5511912345678@s.whatsapp.net"
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: &jid})
	body := func(extra string) string {
		return `{"user_id":"` + user + `","type":"weekly_review","key":"engagement.weekly_review.celebration",` +
			`"params":{"count":"3"}` + extra + `}`
	}
	const jsonType = "application/json"
	messages := func() int {
		return fixture.CountMessages(t, pool, fixture.Messages{Users: []string{user}})
	}

	resp, out := apiPost(t, srv, operator, operatorPassword, jsonType, body(`,"reason":"ticket 1234"`), "Idempotency-Key", " week-48 ")
	var first console.APIMessage
	decode(t, out, &first)
	if resp.StatusCode != http.StatusCreated || !first.Created || first.ID == "" || first.AuditID == 0 || first.UserID != user ||
		first.Type != "weekly_review" || first.Status != "pending" || first.IdempotencyKey != "week-48" {
		t.Fatalf("a new message: %d %s; want 201 with the message, its id and its audit row", resp.StatusCode, out)
	}
	if first.JID != "••••5678" || strings.Contains(out, "91234") || strings.Contains(out, `"3"`) {
		t.Errorf("the answer %s shows the JID (want ••••5678 only) or the params", out)
	}
	if ct := resp.Header.Get("Content-Type"); ct != jsonType {
		t.Errorf("Content-Type %q, want %s", ct, jsonType)
	}
	var row *fixture.AuditEntry
	for _, e := range fixture.ConsoleAudit(t, pool) {
		if e.ID == first.AuditID && e.Action == "enqueue" && e.Actor == operator && e.Messages == 1 {
			row = &e
		}
	}
	if row == nil {
		t.Fatalf("no audit row %d of the enqueue by %s of 1 message", first.AuditID, operator)
	}
	filter, _ := row.Filter["message_id"].(string)
	reason := ""
	if row.Reason != nil {
		reason = *row.Reason
	}
	if reason != "ticket 1234" || filter != first.ID {
		t.Errorf("audit row: reason %q, message %q; want the reason given and message %s", reason, filter, first.ID)
	}

	// Replays: by header, by body, by both agreeing; other params change
	// nothing (and are flagged).
	for _, replay := range []struct {
		name, body string
		headers    []string
	}{
		{"header", body(`,"params":null`), []string{"Idempotency-Key", "week-48"}},
		{"body", body(`,"idempotency_key":"week-48"`), nil},
		{"both", body(`,"idempotency_key":" week-48"`), []string{"Idempotency-Key", "week-48"}},
	} {
		resp, out := apiPost(t, srv, operator, operatorPassword, jsonType, replay.body, replay.headers...)
		var again console.APIMessage
		decode(t, out, &again)
		if resp.StatusCode != http.StatusOK || again.ID != first.ID || again.Created || again.AuditID != 0 {
			t.Errorf("replay by %s: %d %s; want 200 with message %s, created false", replay.name, resp.StatusCode, out, first.ID)
		}
	}
	resp, out = apiPost(t, srv, operator, operatorPassword, jsonType,
		strings.Replace(body(""), `"3"`, `"9"`, 1), "Idempotency-Key", "week-48")
	var differs console.APIMessage
	decode(t, out, &differs)
	if resp.StatusCode != http.StatusOK || !differs.PayloadDiffers {
		t.Errorf("replay with other params: %d %s; want 200 with payload_differs", resp.StatusCode, out)
	}
	if n := messages(); n != 1 {
		t.Errorf("%d messages after one new and four replays, want 1", n)
	}
	if n := len(fixture.ConsoleAudit(t, pool)); n != 1 {
		t.Errorf("%d audit rows, want 1: a replay changes nothing and is not an action", n)
	}
	if msgs := fixture.MessagesOf(t, pool, user); len(msgs) != 1 || msgs[0].Params["count"] != "3" {
		t.Errorf("queue %+v, want the first params to stand", msgs)
	}

	// Refusals: nothing is written, the error is JSON and says what.
	for _, bad := range []struct {
		name, user, password, contentType, body string
		headers                                 []string
		code                                    int
		field, says                             string
	}{
		{"header and body differ", operator, operatorPassword, jsonType, body(`,"idempotency_key":"week-49"`),
			[]string{"Idempotency-Key", "week-48"}, 400, "Idempotency-Key", "differ"},
		{"two headers", operator, operatorPassword, jsonType, body(""), []string{"Idempotency-Key", "a", "Idempotency-Key", "b"}, 400, "Idempotency-Key", "one"},
		{"a header key with a control character", operator, operatorPassword, jsonType, body(""), []string{"Idempotency-Key", "week\t48"}, 400, "Idempotency-Key", "control character"},
		{"a viewer", viewer, viewerPassword, jsonType, body(""), nil, 403, "", "operators"},
		{"a form", operator, operatorPassword, "application/x-www-form-urlencoded", "user_id=" + user + "&type=reminder", nil, 415, "", "application/json"},
		{"text/plain, as a cross-site form can send", operator, operatorPassword, "text/plain", body(""), nil, 415, "", "application/json"},
		{"no content type", operator, operatorPassword, "", body(""), nil, 415, "", "application/json"},
		{"malformed JSON", operator, operatorPassword, jsonType, `{"user_id":`, nil, 400, "", "JSON"},
		{"an unknown field", operator, operatorPassword, jsonType, body(`,"message_type":"goodbye"`), nil, 400, "", "message_type"},
		{"a number for a string", operator, operatorPassword, jsonType, `{"user_id":7,"type":"reminder"}`, nil, 400, "", "user_id"},
		{"not a UUID", operator, operatorPassword, jsonType, `{"user_id":"nope","type":"reminder"}`, nil, 400, "user_id", "UUID"},
		{"no type", operator, operatorPassword, jsonType, `{"user_id":"` + user + `"}`, nil, 400, "type", "required"},
		{"params not strings", operator, operatorPassword, jsonType, body(`,"params":{"count":3}`), nil, 400, "params", "strings"},
		{"bad schedule", operator, operatorPassword, jsonType, body(`,"scheduled_for":"tomorrow"`), nil, 400, "scheduled_for", "RFC 3339"},
		{"a two-line reason", operator, operatorPassword, jsonType, body(`,"reason":"a\nb"`), nil, 400, "reason", "one line"},
		{"a long reason", operator, operatorPassword, jsonType, body(`,"reason":"` + strings.Repeat("r", 501) + `"`), nil, 400, "reason", "500"},
	} {
		resp, out := apiPost(t, srv, bad.user, bad.password, bad.contentType, bad.body, bad.headers...)
		var e console.APIError
		if err := json.Unmarshal([]byte(out), &e); err != nil || resp.StatusCode != bad.code || e.Code != bad.code ||
			e.Field != bad.field || !strings.Contains(e.Error, bad.says) {
			t.Errorf("%s: %d %s; want %d, field %q, an error saying %q", bad.name, resp.StatusCode, out, bad.code, bad.field, bad.says)
		}
	}
	// Another origin's script: refused before anything is read.
	resp, out = apiPost(t, srv, operator, operatorPassword, jsonType, body(""), "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("Content-Type"), jsonType) {
		t.Errorf("a cross-site POST: %d %s %s, want 403 as JSON", resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}
	if n := messages(); n != 1 {
		t.Errorf("%d messages after the refusals, want still 1", n)
	}

	// No key: every call is a new message.
	var ids []string
	for range 2 {
		resp, out := apiPost(t, srv, operator, operatorPassword, "application/json; charset=utf-8", body(""))
		var m console.APIMessage
		decode(t, out, &m)
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("keyless: %d %s, want 201", resp.StatusCode, out)
		}
		ids = append(ids, m.ID)
	}
	if ids[0] == ids[1] {
		t.Errorf("two keyless calls gave one message %s", ids[0])
	}
	// A user with no JID and none given: 400 naming jid.
	nobody := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: fixture.NoJID})
	resp, out = apiPost(t, srv, operator, operatorPassword, jsonType, `{"user_id":"`+nobody+`","type":"reminder"}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(out, `"field":"jid"`) {
		t.Errorf("no destination: %d %s, want 400 naming jid", resp.StatusCode, out)
	}
	if strings.Contains(logs.String(), "91234") {
		t.Errorf("the log holds the JID: %s", logs.String())
	}
}

// TestEnqueueAPIConcurrentReplays: callers racing with one key get one
// message: one 201, the rest 200 with its id.
func TestEnqueueAPIConcurrentReplays(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	srv, _ := serveLogged(t, pool)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	const n = 8
	codes := make([]int, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, out := apiPost(t, srv, operator, operatorPassword, "application/json",
				`{"user_id":"`+user+`","type":"reminder"}`, "Idempotency-Key", "race")
			var m console.APIMessage
			_ = json.Unmarshal([]byte(out), &m)
			codes[i], ids[i] = resp.StatusCode, m.ID
		})
	}
	wg.Wait()
	created := 0
	for i := range n {
		if codes[i] == http.StatusCreated {
			created++
		}
		if (codes[i] != http.StatusCreated && codes[i] != http.StatusOK) || ids[i] != ids[0] {
			t.Errorf("request %d: %d %s, want 200 or 201 with %s", i, codes[i], ids[i], ids[0])
		}
	}
	if created != 1 {
		t.Errorf("%d calls created a message, want 1", created)
	}
	if c := fixture.CountMessages(t, pool, fixture.Messages{}); c != 1 {
		t.Errorf("%d messages, want 1", c)
	}
}

// TestOpenAPIDocument: GET /api/openapi.json is an OpenAPI 3 document
// that lists POST /api/messages with its status codes, the
// Idempotency-Key header, and every field the API reads and answers.
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	srv, _ := serveLogged(t, pool)
	resp, body := get(t, srv, "/api/openapi.json", viewer, viewerPassword, false)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/openapi.json: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Parameters []struct{ Name, In string }
			Responses  map[string]any
		}
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any
			}
		}
	}
	decode(t, body, &doc)
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi %q, want 3.x", doc.OpenAPI)
	}
	post, ok := doc.Paths["/api/messages"]["post"]
	if !ok {
		t.Fatalf("no POST /api/messages in %v", doc.Paths)
	}
	for _, code := range []string{"200", "201", "400", "401", "403", "409", "415", "500"} {
		if _, ok := post.Responses[code]; !ok {
			t.Errorf("POST /api/messages: no %s response documented", code)
		}
	}
	if len(post.Parameters) != 1 || post.Parameters[0].Name != "Idempotency-Key" || post.Parameters[0].In != "header" {
		t.Errorf("parameters %+v, want the Idempotency-Key header", post.Parameters)
	}
	if _, ok := doc.Paths["/api/openapi.json"]["get"]; !ok {
		t.Error("GET /api/openapi.json is not documented")
	}
	// Every field, by its JSON name, from the types the code uses.
	for schema, typ := range map[string]reflect.Type{
		"EnqueueRequest": reflect.TypeFor[sender.Request](),
		"Message":        reflect.TypeFor[console.APIMessage](),
		"Error":          reflect.TypeFor[console.APIError](),
	} {
		props := doc.Components.Schemas[schema].Properties
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if _, ok := props[name]; !ok {
				t.Errorf("schema %s lacks %s", schema, name)
			}
		}
	}
	if _, ok := doc.Components.Schemas["EnqueueRequest"].Properties["reason"]; !ok {
		t.Error("schema EnqueueRequest lacks reason")
	}
}
