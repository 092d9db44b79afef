package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

const (
	testToken   = "EAAGtestACCESStoken0123456789"
	testPhoneID = "109876543210987"
)

func testTemplates() map[string]transport.WhatsAppTemplate {
	return map[string]transport.WhatsAppTemplate{
		"engagement.goodbye.self_select": {
			Name:     "engagement_goodbye_v2",
			Language: map[string]string{"pt-BR": "pt_BR", "en": "en_US"},
			Params:   []string{"name", "count"},
		},
		"engagement.weekly_review.celebration": {
			Name:     "weekly_review_v1",
			Language: map[string]string{"es": "es", "en": "en_US"},
		},
	}
}

func newWhatsApp(t *testing.T, baseURL string) *transport.WhatsApp {
	t.Helper()
	w, err := transport.NewWhatsApp(transport.WhatsAppConfig{
		BaseURL: baseURL, PhoneNumberID: testPhoneID, AccessToken: testToken, Templates: testTemplates(),
	})
	if err != nil {
		t.Fatalf("NewWhatsApp: %v", err)
	}
	return w
}

// waSuccess answers like the Cloud API accepting a message.
func waSuccess(w http.ResponseWriter, _ *http.Request, _ []byte) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"messaging_product":"whatsapp","contacts":[{"input":"`+testPhone+`","wa_id":"`+testPhone+`"}],"messages":[{"id":"wamid.HBgNNTUxMTk4NzY1NDMyMRUCABEYEjA1"}]}`)
}

func TestWhatsAppRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*transport.Delivery)
		want   map[string]any // the "template" object
	}{
		{
			name:   "pt-BR with ordered params",
			mutate: func(*transport.Delivery) {},
			want: map[string]any{
				"name":     "engagement_goodbye_v2",
				"language": map[string]any{"code": "pt_BR"},
				"components": []any{map[string]any{"type": "body", "parameters": []any{
					map[string]any{"type": "text", "text": "Maria"},
					map[string]any{"type": "text", "text": "3"},
				}}},
			},
		},
		{
			name:   "en locale",
			mutate: func(d *transport.Delivery) { d.Locale = "en" },
			want: map[string]any{
				"name":     "engagement_goodbye_v2",
				"language": map[string]any{"code": "en_US"},
				"components": []any{map[string]any{"type": "body", "parameters": []any{
					map[string]any{"type": "text", "text": "Maria"},
					map[string]any{"type": "text", "text": "3"},
				}}},
			},
		},
		{
			name: "regional locale uses its language; multi-line param flattened",
			mutate: func(d *transport.Delivery) {
				d.Locale = "en-GB"
				d.Params = map[string]string{"name": "Maria\n\tda  Silva", "count": "3"}
			},
			want: map[string]any{
				"name":     "engagement_goodbye_v2",
				"language": map[string]any{"code": "en_US"},
				"components": []any{map[string]any{"type": "body", "parameters": []any{
					map[string]any{"type": "text", "text": "Maria da Silva"},
					map[string]any{"type": "text", "text": "3"},
				}}},
			},
		},
		{
			name:   "unmapped locale falls back to pt-BR",
			mutate: func(d *transport.Delivery) { d.Locale = "fr" },
			want: map[string]any{
				"name":     "engagement_goodbye_v2",
				"language": map[string]any{"code": "pt_BR"},
				"components": []any{map[string]any{"type": "body", "parameters": []any{
					map[string]any{"type": "text", "text": "Maria"},
					map[string]any{"type": "text", "text": "3"},
				}}},
			},
		},
		{
			name: "no params, no pt-BR: no components, first sorted language",
			mutate: func(d *transport.Delivery) {
				d.Type, d.Key, d.Params, d.Locale = "weekly_review", "engagement.weekly_review.celebration", nil, "pt-BR"
			},
			want: map[string]any{
				"name":     "weekly_review_v1",
				"language": map[string]any{"code": "en_US"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, waSuccess)
			d := delivery()
			tt.mutate(&d)

			res, err := newWhatsApp(t, srv.URL+"/v21.0/").Send(context.Background(), d)
			if err != nil {
				t.Fatalf("Send: got error %v, want nil", err)
			}
			if want := "wamid.HBgNNTUxMTk4NzY1NDMyMRUCABEYEjA1"; res.ProviderMessageID != want {
				t.Errorf("ProviderMessageID: got %q, want %q", res.ProviderMessageID, want)
			}
			reqs := rec.requests()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			for _, c := range []struct{ name, got, want string }{
				{"method", r.method, http.MethodPost},
				{"path", r.path, "/v21.0/" + testPhoneID + "/messages"},
				{"Authorization", r.header.Get("Authorization"), "Bearer " + testToken},
				{"Content-Type", r.header.Get("Content-Type"), "application/json"},
			} {
				if c.got != c.want {
					t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
				}
			}
			var body map[string]any
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Fatalf("body is not a JSON object: %v", err)
			}
			want := map[string]any{
				"messaging_product": "whatsapp",
				"recipient_type":    "individual",
				"to":                testPhone,
				"type":              "template",
				"template":          tt.want,
			}
			if !reflect.DeepEqual(body, want) {
				t.Errorf("body:\n got %s\nwant %s", r.body, mustJSON(want))
			}
			if strings.Contains(string(r.body), "Faz um tempinho") {
				t.Errorf("body %s carries the rendered text, want only the template", r.body)
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestWhatsAppRecipients(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, destination, jid string
		wantTo                 string // "" means a permanent error without a request
		wantErr                string
	}{
		{"user JID", "individual", testJID, testPhone, ""},
		{"device JID", "individual", testPhone + ":12@s.whatsapp.net", testPhone, ""},
		{"legacy c.us", "individual", testPhone + "@c.us", testPhone, ""},
		{"bare number", "individual", "+" + testPhone, testPhone, ""},
		{"group JID", "individual", "120363025246125486@g.us", "", "groups are unsupported"},
		{"group destination", "group", "120363025246125486@g.us", "", "groups are unsupported"},
		{"lid JID", "individual", "123456789012345@lid", "", "unsupported"},
		{"no number", "individual", "someone@s.whatsapp.net", "", "invalid recipient"},
		{"empty JID", "individual", "", "", "invalid recipient"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, waSuccess)
			d := delivery()
			d.Destination, d.DestinationJID = tt.destination, tt.jid

			_, err := newWhatsApp(t, srv.URL).Send(context.Background(), d)
			reqs := rec.requests()
			if tt.wantTo != "" {
				if err != nil {
					t.Fatalf("Send: got error %v, want nil", err)
				}
				var body struct{ To string }
				if len(reqs) != 1 || json.Unmarshal(reqs[0].body, &body) != nil || body.To != tt.wantTo {
					t.Errorf("to: got %q, want %q", body.To, tt.wantTo)
				}
				return
			}
			terr := asError(t, err)
			if !terr.Permanent {
				t.Errorf("Permanent: got false, want true (error %q)", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
			if len(reqs) != 0 {
				t.Errorf("got %d requests, want none", len(reqs))
			}
			checkNoLeak(t, err, tt.jid, testPhone, "120363025246125486", testToken)
		})
	}
}

func TestWhatsAppUnknownKeyAndMissingParam(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mutate  func(*transport.Delivery)
		wantErr string
	}{
		{"unknown key", func(d *transport.Delivery) { d.Key = "engagement.nudge.unknown" }, `"engagement.nudge.unknown"`},
		{"missing param", func(d *transport.Delivery) { d.Params = map[string]string{"name": "Maria"} }, `"count"`},
		{"blank param", func(d *transport.Delivery) { d.Params = map[string]string{"name": " \n", "count": "3"} }, `"name"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, waSuccess)
			d := delivery()
			tt.mutate(&d)

			_, err := newWhatsApp(t, srv.URL).Send(context.Background(), d)
			terr := asError(t, err)
			if !terr.Permanent {
				t.Errorf("Permanent: got false, want true")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not name %s", err, tt.wantErr)
			}
			if n := len(rec.requests()); n != 0 {
				t.Errorf("got %d requests, want none", n)
			}
			checkNoLeak(t, err, testJID, testPhone, testText, testToken)
		})
	}
}

func TestWhatsAppErrorClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		status, code   int
		retryAfter     string // header
		permanent      bool
		wantRetryAfter bool
	}{
		// No delay of its own: the run slows as a whole (delivery/throughput.go, issue 57).
		{"rate limit hit", 400, 130429, "", false, false},
		{"pair rate limit", 400, 131056, "", false, true},
		{"WABA rate limit", 400, 80007, "", false, true},
		{"app rate limit", 403, 4, "", false, true},
		{"throttle with Retry-After", 429, 130429, "42", false, true},
		{"something went wrong", 500, 131000, "", false, false},
		{"service unavailable", 503, 131016, "", false, false},
		{"server temporarily unavailable", 400, 133004, "", false, false},
		{"re-engagement", 400, 131047, "", true, false},
		{"undeliverable", 400, 131026, "", true, false},
		{"invalid parameter", 400, 100, "", true, false},
		{"token expired", 401, 190, "", true, false},
		{"unsupported type", 400, 131051, "", true, false},
		{"param count mismatch", 400, 132000, "", true, false},
		{"template missing", 404, 132001, "", true, false},
		{"unlisted code on 4xx", 400, 135000, "", true, false},
		{"unlisted code on 5xx", 502, 1, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.Header().Set("Content-Type", "application/json")
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, `{"error":{"message":"(#`+strconv.Itoa(tt.code)+`) Failure sending to `+testPhone+` from `+testPhoneID+` token `+testToken+`","type":"OAuthException","code":`+strconv.Itoa(tt.code)+`,"error_subcode":2494010,"error_data":{"messaging_product":"whatsapp","details":"details for `+testPhone+`"},"fbtrace_id":"AbCdEf"}}`)
			})

			_, err := newWhatsApp(t, srv.URL).Send(context.Background(), delivery())
			terr := asError(t, err)
			if terr.Permanent != tt.permanent {
				t.Errorf("Permanent: got %v, want %v (error %q)", terr.Permanent, tt.permanent, err)
			}
			if terr.StatusCode != tt.status {
				t.Errorf("StatusCode: got %d, want %d", terr.StatusCode, tt.status)
			}
			if got := terr.RetryAfter > 0; got != tt.wantRetryAfter {
				t.Errorf("RetryAfter: got %v, want > 0: %v", terr.RetryAfter, tt.wantRetryAfter)
			}
			if tt.retryAfter == "42" && terr.RetryAfter != 42*time.Second {
				t.Errorf("RetryAfter: got %v, want 42s from the header", terr.RetryAfter)
			}
			class := "transient"
			if tt.permanent {
				class = "permanent"
			}
			if want := "whatsapp: error " + strconv.Itoa(tt.code) + " (" + class + ")"; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			checkNoLeak(t, err, testToken, testPhone, testPhoneID, testJID, testText)
			// Only the code and subcode are kept: Meta's message and details
			// may quote the recipient or the text (issue 14, item 7).
			if !strings.Contains(err.Error(), "subcode 2494010") || strings.Contains(err.Error(), "Failure sending") ||
				strings.Contains(err.Error(), "details for") {
				t.Errorf("error %q, want the code and subcode and no message or details", err)
			}
		})
	}
}

func TestWhatsAppHTTPErrorsWithoutAPIError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status    int
		body      string
		permanent bool
	}{
		{502, "<html>Bad Gateway</html>", false},
		{503, "", false},
		{429, `{"message":"slow down"}`, false},
		{400, "bad", true},
		{404, "", true},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			_, err := newWhatsApp(t, srv.URL).Send(context.Background(), delivery())
			terr := asError(t, err)
			if terr.Permanent != tt.permanent || terr.StatusCode != tt.status {
				t.Errorf("got Permanent %v StatusCode %d, want %v %d (error %q)", terr.Permanent, terr.StatusCode, tt.permanent, tt.status, err)
			}
			checkNoLeak(t, err, testToken, testPhone, testPhoneID)
		})
	}
}

func TestWhatsAppCallerCancel(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	var rec recorder
	srv := rec.server(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		close(arrived)
		<-r.Context().Done()
	})
	wa := newWhatsApp(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()

	_, err := wa.Send(ctx, delivery())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(%v, context.Canceled) = false, want true", err)
	}
	asError(t, err)
}

func TestNewWhatsAppValidation(t *testing.T) {
	t.Parallel()
	valid := transport.WhatsAppConfig{PhoneNumberID: testPhoneID, AccessToken: testToken, Templates: testTemplates()}
	tests := []struct {
		name   string
		mutate func(*transport.WhatsAppConfig)
		ok     bool
	}{
		{"valid with default base URL", func(*transport.WhatsAppConfig) {}, true},
		{"no phone number id", func(c *transport.WhatsAppConfig) { c.PhoneNumberID = "" }, false},
		{"phone number id not digits", func(c *transport.WhatsAppConfig) { c.PhoneNumberID = "12/../34" }, false},
		{"no token", func(c *transport.WhatsAppConfig) { c.AccessToken = " " }, false},
		{"token with a newline", func(c *transport.WhatsAppConfig) { c.AccessToken = testToken + "\nX-Evil: 1" }, false},
		{"no templates", func(c *transport.WhatsAppConfig) { c.Templates = nil }, false},
		{"template without name", func(c *transport.WhatsAppConfig) {
			c.Templates = map[string]transport.WhatsAppTemplate{"k": {Language: map[string]string{"en": "en_US"}}}
		}, false},
		{"template without language", func(c *transport.WhatsAppConfig) {
			c.Templates = map[string]transport.WhatsAppTemplate{"k": {Name: "t"}}
		}, false},
		{"bad base URL", func(c *transport.WhatsAppConfig) { c.BaseURL = "graph.facebook.com/v21.0" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := valid
			cfg.Templates = testTemplates()
			tt.mutate(&cfg)
			wa, err := transport.NewWhatsApp(cfg)
			if gotOK := err == nil; gotOK != tt.ok {
				t.Fatalf("NewWhatsApp: got error %v, want ok=%v", err, tt.ok)
			}
			if err != nil {
				checkNoLeak(t, err, testToken)
				return
			}
			if wa.Name() != "whatsapp" || wa.Deduplicates() {
				t.Errorf("Name, Deduplicates: got %q, %v, want \"whatsapp\", false", wa.Name(), wa.Deduplicates())
			}
		})
	}
}

func TestLoadWhatsAppTemplates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, content string
		want          map[string]transport.WhatsAppTemplate // nil means an error
	}{
		{
			name: "happy path",
			content: `{
  "engagement.goodbye.self_select": {"name": "goodbye_v2", "language": {"pt-BR": "pt_BR", "en": "en_US"}, "params": ["name"]},
  "engagement.weekly_review.celebration": {"name": "weekly_v1", "language": {"pt-BR": "pt_BR"}}
}`,
			want: map[string]transport.WhatsAppTemplate{
				"engagement.goodbye.self_select":       {Name: "goodbye_v2", Language: map[string]string{"pt-BR": "pt_BR", "en": "en_US"}, Params: []string{"name"}},
				"engagement.weekly_review.celebration": {Name: "weekly_v1", Language: map[string]string{"pt-BR": "pt_BR"}},
			},
		},
		{name: "bad JSON", content: `{"engagement.goodbye.self_select": {"name": "goodbye_v2",`},
		{name: "not an object", content: `["goodbye_v2"]`},
		{name: "misspelt field", content: `{"k": {"name": "t", "langauge": {"en": "en_US"}}}`},
		{name: "missing name", content: `{"k": {"language": {"en": "en_US"}}}`},
		{name: "empty", content: `{}`},
		{name: "trailing data", content: `{"k": {"name": "t", "language": {"en": "en_US"}}} {}`},
		{
			name:    "Meta's categories (issue 57)",
			content: `{"m": {"name": "m", "language": {"en": "en_US"}, "category": "MARKETING"}, "u": {"name": "u", "language": {"en": "en_US"}, "category": "UTILITY"}}`,
			want: map[string]transport.WhatsAppTemplate{
				"m": {Name: "m", Language: map[string]string{"en": "en_US"}, Category: "MARKETING"},
				"u": {Name: "u", Language: map[string]string{"en": "en_US"}, Category: "UTILITY"},
			},
		},
		{name: "a category not Meta's word", content: `{"k": {"name": "t", "language": {"en": "en_US"}, "category": "PROMOTIONAL"}}`},
		{name: "a category in lower case", content: `{"k": {"name": "t", "language": {"en": "en_US"}, "category": "marketing"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "templates.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := transport.LoadWhatsAppTemplates(path)
			if tt.want == nil {
				if err == nil {
					t.Fatalf("LoadWhatsAppTemplates: got %v, nil; want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadWhatsAppTemplates: got error %v, want nil", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("LoadWhatsAppTemplates:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		if _, err := transport.LoadWhatsAppTemplates(filepath.Join(t.TempDir(), "nope.json")); err == nil {
			t.Errorf("LoadWhatsAppTemplates(missing file): got nil error, want one")
		}
	})
}
