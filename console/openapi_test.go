package console_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/console"
)

// openAPIDoc is what TestOpenAPIDocumentMatchesTheHandlers reads of the
// document: each path's operations and their responses (a response may
// be a $ref to components.responses).
type openAPIDoc struct {
	Paths      map[string]map[string]openAPIResponses
	Components struct {
		Responses map[string]openAPIResponse
	}
}

type openAPIResponses struct {
	Responses map[string]openAPIResponse
}

type openAPIResponse struct {
	Ref     string `json:"$ref"`
	Headers map[string]json.RawMessage
}

// response is operation's response for code, its $ref followed; ok is
// false when the document lists none.
func (d openAPIDoc) response(op openAPIResponses, code int) (openAPIResponse, bool) {
	r, ok := op.Responses[strconv.Itoa(code)]
	if name, isRef := strings.CutPrefix(r.Ref, "#/components/responses/"); ok && isRef {
		r, ok = d.Components.Responses[name]
	}
	return r, ok
}

// Issue 56, finding 7: 405 and 429 were not in the OpenAPI document,
// though the console answers them. This test asks the real handlers, for
// each path of the document: every method it does not document answers
// 405, as JSON, with Allow naming exactly the documented ones, and each
// operation lists 405; each operation, behind the login limits, really
// answers 429 with Retry-After to a client over its limit, and lists 429
// with that header; and the paths served are the document's. A route or a
// limit that changes without the document fails here.
func TestOpenAPIDocumentMatchesTheHandlers(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	h, err := console.New(console.Config{Pool: pool, Logger: zerolog.Nop(),
		Auth: console.Auth{Users: htpasswd(t), Operators: []string{operator}, ClientLimit: console.LoginLimit{Burst: 1, Every: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/api/openapi.json", nil)
	req.SetBasicAuth(operator, operatorPassword)
	rec := from(h, "192.0.2.1:1", req)
	var doc openAPIDoc
	decode(t, rec.Body.String(), &doc)
	if len(doc.Paths) == 0 {
		t.Fatalf("GET /api/openapi.json: %d, no paths: %.300s", rec.Code, rec.Body)
	}

	var documented []string
	for path := range doc.Paths {
		documented = append(documented, path)
	}
	if served := slices.Sorted(slices.Values(h.APIPaths())); !slices.Equal(served, slices.Sorted(slices.Values(documented))) {
		t.Errorf("the API serves %q, the document lists %q", served, documented)
	}

	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	client := 0
	for path, item := range doc.Paths {
		var allowed []string
		for _, m := range methods {
			if _, ok := item[strings.ToLower(m)]; ok || m == http.MethodHead && item["get"].Responses != nil {
				allowed = append(allowed, m)
			}
		}
		for _, m := range methods {
			if slices.Contains(allowed, m) {
				continue
			}
			req := httptest.NewRequest(m, path, strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			req.SetBasicAuth(operator, operatorPassword)
			rec := from(h, "192.0.2.1:1", req)
			var body console.APIError
			if rec.Code != http.StatusMethodNotAllowed || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d %q, want 405 as a JSON error", m, path, rec.Code, rec.Body)
			}
			if got := strings.Split(rec.Header().Get("Allow"), ", "); !slices.Equal(got, allowed) {
				t.Errorf("%s %s: Allow %q, want %q (the document's methods)", m, path, rec.Header().Get("Allow"), allowed)
			}
		}
		for method, op := range item {
			if _, ok := doc.response(op, http.StatusMethodNotAllowed); !ok {
				t.Errorf("%s %s: the document lists no 405", strings.ToUpper(method), path)
			}
			// A client over its limit (one failure) is answered 429.
			client++
			addr := "198.51.100." + strconv.Itoa(client) + ":1"
			for i, want := range []int{http.StatusUnauthorized, http.StatusTooManyRequests} {
				req := httptest.NewRequest(strings.ToUpper(method), path, strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				req.SetBasicAuth(operator, "guess")
				rec := from(h, addr, req)
				if rec.Code != want || want == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
					t.Errorf("%s %s, wrong password %d: %d (Retry-After %q), want %d", strings.ToUpper(method), path, i+1,
						rec.Code, rec.Header().Get("Retry-After"), want)
				}
			}
			if r, ok := doc.response(op, http.StatusTooManyRequests); !ok {
				t.Errorf("%s %s: the document lists no 429", strings.ToUpper(method), path)
			} else if _, ok := r.Headers["Retry-After"]; !ok {
				t.Errorf("%s %s: the document's 429 has no Retry-After header", strings.ToUpper(method), path)
			}
		}
	}
}
