package transport_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// captured is one request a test server received.
type captured struct {
	method, path, rawQuery string
	header                 http.Header
	body                   []byte
}

// recorder is a test server that records requests and answers with handle.
type recorder struct {
	mu   sync.Mutex
	reqs []captured
}

func (rec *recorder) server(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, captured{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		rec.mu.Unlock()
		handle(w, r, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (rec *recorder) requests() []captured {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]captured(nil), rec.reqs...)
}

func newWebhook(t *testing.T, cfg transport.WebhookConfig) *transport.Webhook {
	t.Helper()
	w, err := transport.NewWebhook(cfg)
	if err != nil {
		t.Fatalf("NewWebhook: %v", err)
	}
	return w
}

func TestWebhookRequest(t *testing.T) {
	t.Parallel()
	var rec recorder
	srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"message_id":"bot-42"}`)
	})
	wh := newWebhook(t, transport.WebhookConfig{URL: srv.URL + "/hooks/engagement?tenant=a", Secret: testSecret})
	d := delivery()

	res, err := wh.Send(context.Background(), d)
	if err != nil {
		t.Fatalf("Send: got error %v, want nil", err)
	}
	if got, want := res.ProviderMessageID, "bot-42"; got != want {
		t.Errorf("ProviderMessageID: got %q, want %q", got, want)
	}
	reqs := rec.requests()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	for _, c := range []struct{ name, got, want string }{
		{"method", r.method, http.MethodPost},
		{"path", r.path, "/hooks/engagement"},
		{"query", r.rawQuery, "tenant=a"},
		{"Content-Type", r.header.Get("Content-Type"), "application/json"},
		{"Idempotency-Key", r.header.Get("Idempotency-Key"), d.IdempotencyKey},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}

	sig := r.header.Get("X-Engagement-Signature")
	if !transport.VerifySignature(testSecret, r.body, sig) {
		t.Errorf("VerifySignature(secret, body, %q) = false, want true", sig)
	}
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write(r.body)
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); sig != want {
		t.Errorf("X-Engagement-Signature: got %q, want %q", sig, want)
	}
	if got := transport.Sign(testSecret, r.body); got != sig {
		t.Errorf("Sign: got %q, want the header %q", got, sig)
	}

	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("body is not a JSON object: %v", err)
	}
	want := map[string]any{
		"id":              d.ID,
		"user_id":         d.UserID,
		"message_type":    d.Type,
		"message_key":     d.Key,
		"params":          map[string]any{"name": "Maria", "count": "3"},
		"locale":          d.Locale,
		"text":            d.Text,
		"destination":     d.Destination,
		"destination_jid": d.DestinationJID,
		"idempotency_key": d.IdempotencyKey,
		"attempt":         float64(d.Attempt),
	}
	if got, wantKeys := sortedKeys(body), sortedKeys(want); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("body fields: got %v, want %v", got, wantKeys)
	}
	for k, v := range want {
		if !reflect.DeepEqual(body[k], v) {
			t.Errorf("body[%q]: got %#v, want %#v", k, body[k], v)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestWebhookUnsignedAndNilParams(t *testing.T) {
	t.Parallel()
	var rec recorder
	srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusNoContent) })
	wh := newWebhook(t, transport.WebhookConfig{URL: srv.URL})
	d := delivery()
	d.Params = nil

	if _, err := wh.Send(context.Background(), d); err != nil {
		t.Fatalf("Send: got error %v, want nil", err)
	}
	r := rec.requests()[0]
	if _, ok := r.header["X-Engagement-Signature"]; ok {
		t.Errorf("X-Engagement-Signature: got %q, want no header without a secret", r.header.Get("X-Engagement-Signature"))
	}
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("body: %v", err)
	}
	if got, ok := body["params"].(map[string]any); !ok || len(got) != 0 {
		t.Errorf("params: got %#v, want {}", body["params"])
	}
}

func TestWebhookProviderMessageID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType, body, want string
	}{
		{"message_id", "application/json", `{"message_id":"m-1","id":"i-1"}`, "m-1"},
		{"id", "application/json", `{"id":"i-1"}`, "i-1"},
		{"non-string id", "application/json", `{"id":17}`, ""},
		{"empty body", "", ``, ""},
		{"not JSON", "text/plain", `queued`, ""},
		{"JSON array", "application/json", `["m-1"]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				if tt.contentType != "" {
					w.Header().Set("Content-Type", tt.contentType)
				}
				w.WriteHeader(http.StatusAccepted)
				io.WriteString(w, tt.body)
			})
			res, err := newWebhook(t, transport.WebhookConfig{URL: srv.URL}).Send(context.Background(), delivery())
			if err != nil {
				t.Fatalf("Send: got error %v, want nil", err)
			}
			if res.ProviderMessageID != tt.want {
				t.Errorf("ProviderMessageID: got %q, want %q", res.ProviderMessageID, tt.want)
			}
		})
	}
}

func TestWebhookStatusClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status    int
		permanent bool
	}{
		{500, false}, {502, false}, {503, false}, {504, false}, {408, false}, {425, false}, {429, false},
		{400, true}, {401, true}, {403, true}, {404, true}, {409, true}, {422, true},
		{302, true}, // redirects are not followed
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				if tt.status == http.StatusFound {
					w.Header().Set("Location", "/elsewhere")
				}
				// A careless receiver echoing the whole request, secret and all.
				w.WriteHeader(tt.status)
				io.WriteString(w, "rejected: "+string(body)+" signed "+r.Header.Get("X-Engagement-Signature")+" "+testSecret)
			})
			_, err := newWebhook(t, transport.WebhookConfig{URL: srv.URL, Secret: testSecret}).Send(context.Background(), delivery())
			terr := asError(t, err)
			if terr.Permanent != tt.permanent {
				t.Errorf("Permanent: got %v, want %v (error %q)", terr.Permanent, tt.permanent, err)
			}
			if terr.StatusCode != tt.status {
				t.Errorf("StatusCode: got %d, want %d", terr.StatusCode, tt.status)
			}
			if want := "HTTP " + strconv.Itoa(tt.status); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
			if n := len(rec.requests()); n != 1 {
				t.Errorf("got %d requests, want 1 (no redirect followed)", n)
			}
			checkNoLeak(t, err, testJID, testPhone, testText, "Olá Maria", testSecret, `"message_type"`)
			if len(err.Error()) > 400 {
				t.Errorf("error is %d bytes long, want a short one: %q", len(err.Error()), err)
			}
		})
	}
}

// No part of a response body reaches an error: a receiver may quote the
// text or the recipient in any form (issue 14, item 7). The status stays.
func TestWebhookErrorKeepsTheStatusAndNoBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType, body string
	}{
		{"JSON message field", "application/json", `{"error":{"message":"cannot reach ` + testJID + ` with \"` + jsonText(testText) + `\""}}`},
		{"Python-style ASCII JSON echo", "application/json", `{"detail":"bad text \"Ol\u00e1 Maria! Faz um tempinho que a gente n\u00e3o se fala \ud83d\udc4b <b>&</b>\""}`},
		{"plain text echo with newlines", "text/plain", "bad\nrequest for " + testPhone + "\n" + testText},
		{"long body", "text/plain", strings.Repeat("x", 5000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, tt.body)
			})
			_, err := newWebhook(t, transport.WebhookConfig{URL: srv.URL, Secret: testSecret}).Send(context.Background(), delivery())
			asError(t, err)
			if err.Error() != "webhook: HTTP 400 (permanent)" {
				t.Errorf("error %q, want only the status", err)
			}
			checkNoLeak(t, err, testJID, testPhone, testText, "Olá Maria", `Ol\u00e1 Maria`, testSecret, "xxx", "bad")
		})
	}
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestWebhookRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		header   func() string
		min, max time.Duration
	}{
		{"seconds", func() string { return "7" }, 7 * time.Second, 7 * time.Second},
		{"HTTP-date", func() string { return time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat) }, 85 * time.Second, 91 * time.Second},
		{"capped at an hour", func() string { return "86400" }, time.Hour, time.Hour},
		{"capped HTTP-date", func() string { return time.Now().Add(48 * time.Hour).UTC().Format(http.TimeFormat) }, time.Hour, time.Hour},
		{"huge number", func() string { return "99999999999999999999999" }, time.Hour, time.Hour},
		{"past HTTP-date", func() string { return time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat) }, 0, 0},
		{"garbage", func() string { return "soon" }, 0, 0},
		{"negative", func() string { return "-5" }, 0, 0},
		{"fraction", func() string { return "1.5" }, 0, 0},
		{"absent", func() string { return "" }, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				if h := tt.header(); h != "" {
					w.Header().Set("Retry-After", h)
				}
				w.WriteHeader(http.StatusTooManyRequests)
			})
			_, err := newWebhook(t, transport.WebhookConfig{URL: srv.URL}).Send(context.Background(), delivery())
			terr := asError(t, err)
			if terr.Permanent {
				t.Errorf("Permanent: got true, want false for 429")
			}
			if terr.RetryAfter < tt.min || terr.RetryAfter > tt.max {
				t.Errorf("RetryAfter: got %v, want within [%v, %v]", terr.RetryAfter, tt.min, tt.max)
			}
		})
	}
}

func TestWebhookTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var rec recorder
	srv := rec.server(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	wh := newWebhook(t, transport.WebhookConfig{URL: srv.URL, Secret: testSecret, Timeout: 100 * time.Millisecond})

	start := time.Now()
	_, err := wh.Send(context.Background(), delivery())
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Send took %v, want about the 100ms timeout", elapsed)
	}
	terr := asError(t, err)
	if terr.Permanent {
		t.Errorf("Permanent: got true, want false for a timeout (error %q)", err)
	}
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Errorf("got error %q, want a net.Error with Timeout() true", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(err, context.Canceled) = true for a request timeout, want false")
	}
	if !strings.Contains(err.Error(), "timed out") {
		t.Errorf("error %q does not say it timed out", err)
	}
	checkNoLeak(t, err, testJID, testText, testSecret)
}

func TestWebhookConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	wh := newWebhook(t, transport.WebhookConfig{URL: "http://" + addr + "/hook?token=" + testSecret, Secret: testSecret})

	_, err = wh.Send(context.Background(), delivery())
	terr := asError(t, err)
	if terr.Permanent {
		t.Errorf("Permanent: got true, want false for connection refused (error %q)", err)
	}
	if terr.StatusCode != 0 {
		t.Errorf("StatusCode: got %d, want 0 without a response", terr.StatusCode)
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(err, context.Canceled) = true, want false")
	}
	checkNoLeak(t, err, testJID, testText, testSecret, "/hook")
}

func TestWebhookCallerCancel(t *testing.T) {
	t.Parallel()
	t.Run("during the request", func(t *testing.T) {
		t.Parallel()
		arrived := make(chan struct{})
		var once sync.Once
		var rec recorder
		srv := rec.server(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			once.Do(func() { close(arrived) })
			<-r.Context().Done()
		})
		wh := newWebhook(t, transport.WebhookConfig{URL: srv.URL, Timeout: time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-arrived; cancel() }()

		_, err := wh.Send(ctx, delivery())
		terr := asError(t, err)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("errors.Is(%q, context.Canceled) = false, want true", err)
		}
		if terr.Permanent {
			t.Errorf("Permanent: got true, want false")
		}
	})
	t.Run("before the request", func(t *testing.T) {
		t.Parallel()
		var rec recorder
		srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {})
		wh := newWebhook(t, transport.WebhookConfig{URL: srv.URL})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()

		_, err := wh.Send(ctx, delivery())
		if !errors.Is(err, context.Canceled) {
			t.Errorf("errors.Is(%v, context.Canceled) = false, want true", err)
		}
		if n := len(rec.requests()); n != 0 {
			t.Errorf("got %d requests, want none", n)
		}
	})
}

func TestNewWebhookValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url string
		ok        bool
	}{
		{"https", "https://bot.example.com/hooks/engagement", true},
		{"http with port", "http://localhost:8080/hook", true},
		{"empty", "", false},
		{"relative", "/hooks/engagement", false},
		{"no scheme", "bot.example.com/hook", false},
		{"ftp", "ftp://bot.example.com/hook", false},
		{"no host", "http:///hook", false},
		{"opaque", "http:bot.example.com", false},
		{"unparseable", "http://bot.example.com/%zz?token=" + testSecret, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := transport.NewWebhook(transport.WebhookConfig{URL: tt.url, Secret: testSecret})
			if gotOK := err == nil; gotOK != tt.ok {
				t.Fatalf("NewWebhook(%q): got error %v, want ok=%v", tt.url, err, tt.ok)
			}
			if err != nil {
				checkNoLeak(t, err, testSecret)
			}
		})
	}
}

func TestWebhookIdentity(t *testing.T) {
	t.Parallel()
	wh := newWebhook(t, transport.WebhookConfig{URL: "https://bot.example.com/hook"})
	if got := wh.Name(); got != "webhook" {
		t.Errorf("Name: got %q, want %q", got, "webhook")
	}
	if !wh.Deduplicates() {
		t.Errorf("Deduplicates: got false, want true")
	}
}

func TestSignAndVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"x","text":"oi"}`)
	good := transport.Sign(testSecret, body)
	if !strings.HasPrefix(good, "sha256=") || len(good) != len("sha256=")+64 || good != strings.ToLower(good) {
		t.Fatalf("Sign: got %q, want sha256= and 64 lowercase hex digits", good)
	}
	tests := []struct {
		name, secret string
		body         []byte
		header       string
		want         bool
	}{
		{"valid", testSecret, body, good, true},
		{"upper-case hex", testSecret, body, "sha256=" + strings.ToUpper(strings.TrimPrefix(good, "sha256=")), true},
		{"wrong secret", "other", body, good, false},
		{"tampered body", testSecret, []byte(`{"id":"y","text":"oi"}`), good, false},
		{"missing prefix", testSecret, body, strings.TrimPrefix(good, "sha256="), false},
		{"other algorithm", testSecret, body, "sha1=" + strings.TrimPrefix(good, "sha256="), false},
		{"bad hex", testSecret, body, "sha256=zz" + good[9:], false},
		{"truncated", testSecret, body, good[:len(good)-2], false},
		{"empty header", testSecret, body, "", false},
		{"empty secret", "", body, transport.Sign("", body), false},
	}
	for _, tt := range tests {
		if got := transport.VerifySignature(tt.secret, tt.body, tt.header); got != tt.want {
			t.Errorf("%s: VerifySignature got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A request refused by its connection's write deadline (the delivery's
// wish bound and floor gate set one) wrote nothing: it is not maybe
// delivered, whatever error net/http reports for it. Before, httptrace's
// WroteRequest, which comes before the write system call, made it so, and
// a Cloud API message that never left failed for good as "outcome
// unknown". Twenty sends on fresh connections, so that some report the
// read side's error first.
func TestARequestItsConnectionRefusedToWriteIsNotMaybeDelivered(t *testing.T) {
	t.Parallel()
	var rec recorder
	srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { io.WriteString(w, `{"ok":true}`) })
	for i := range 20 {
		wh := newWebhook(t, transport.WebhookConfig{URL: srv.URL})
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { info.Conn.SetWriteDeadline(time.Now().Add(-time.Second)) },
		})
		_, err := wh.Send(ctx, delivery())
		if terr := asError(t, err); terr.MaybeDelivered || transport.Class(err) == transport.ClassUnknown {
			t.Fatalf("send %d, refused by its write deadline: %+v (%s), want not maybe delivered", i, terr, transport.Class(err))
		}
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("the receiver got %d requests; want none", n)
	}
}

// MaybeDelivered tells a failure after the request was written (the
// receiver may have acted on it) from one before (nothing reached it).
func TestMaybeDeliveredOnlyOnceTheRequestWasWritten(t *testing.T) {
	t.Parallel()
	var rec recorder
	srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	_, err := newWebhook(t, transport.WebhookConfig{URL: srv.URL}).Send(context.Background(), delivery())
	if terr := asError(t, err); !terr.MaybeDelivered || terr.Permanent {
		t.Errorf("closed after the request: %+v, want transient and maybe delivered", terr)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/hook"
	ln.Close()
	_, err = newWebhook(t, transport.WebhookConfig{URL: refused}).Send(context.Background(), delivery())
	if terr := asError(t, err); terr.MaybeDelivered {
		t.Errorf("connection refused: %+v, want not maybe delivered", terr)
	}
}
