package console_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/seeded"
)

// The console's users in these tests: ops may act, viewer only looks.
const (
	operator, operatorPassword = "ops", "ops-secret"
	viewer, viewerPassword     = "viewer", "viewer-secret"
)

// htpasswd is what ParseHtpasswd would read from a file holding ops and
// viewer (bcrypt at its cheapest cost: the tests check logins, not bcrypt).
func htpasswd(t testing.TB) map[string][]byte {
	t.Helper()
	var lines []string
	for _, u := range [][2]string{{operator, operatorPassword}, {viewer, viewerPassword}} {
		h, err := bcrypt.GenerateFromPassword([]byte(u[1]), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, u[0]+":"+string(h))
	}
	users, err := console.ParseHtpasswd(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return users
}

// serve starts the console over pool with htpasswd auth (ops an operator)
// and pages as of asOf.
func serve(t testing.TB, pool *pgxpool.Pool, asOf time.Time) *httptest.Server {
	t.Helper()
	return serveWith(t, console.Config{Pool: pool, AsOf: func() time.Time { return asOf }})
}

// serveWith is serve with cfg, its users and logger the tests'.
func serveWith(t testing.TB, cfg console.Config) *httptest.Server {
	t.Helper()
	cfg.Auth = console.Auth{Users: htpasswd(t), Operators: []string{operator}}
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t))
	h, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// failedGroups are the failures seededWithFailures makes: two reasons, the
// first with ids and numbers that differ between its messages.
var failedGroups = []struct {
	errors []string
	group  string
}{
	{[]string{"webhook: receiver answered 500 for 3fa85f64-5717-4562-b3fc-2c963f66afa6 at 1764000000",
		"webhook: receiver answered 500 for 9c2b4f1e-0000-4000-8000-000000000001 at 1764000123"},
		"webhook: receiver answered 500 for # at #"},
	{[]string{"cloud api: (#131026) Message undeliverable"}, "cloud api: (#131026) Message undeliverable"},
}

// seededWithFailures is seeded.Pool with some of its goodbyes failed: 6
// of the first reason group, 3 of the second.
func seededWithFailures(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _, _ := seeded.Pool(t.(*testing.T))
	var ids []string // the pending goodbyes, in id order (a UUID's text sorts as the UUID)
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Type: "goodbye", Status: "pending"}) {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	if len(ids) < 9 {
		t.Fatalf("%d pending goodbyes seeded, want 9 to fail", len(ids))
	}
	errs := []string{failedGroups[0].errors[0], failedGroups[0].errors[1], failedGroups[1].errors[0]}
	for i, id := range ids[:9] {
		fixture.ConsoleFailMessages(t, pool, fixture.ConsoleFailure{ID: id, Error: errs[i/3], RetryCount: 3})
	}
	return pool
}

// reply is a response, read whole and closed: the status, the headers and
// the body.
type reply struct {
	StatusCode int
	Header     http.Header
}

// get requests path as user (no user: no credentials), asking for JSON
// when asJSON.
func get(t testing.TB, srv *httptest.Server, path, user, password string, asJSON bool) (reply, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	if asJSON {
		req.Header.Set("Accept", "application/json")
	}
	return do(t, srv, req)
}

// post posts form to path as user, asking for JSON.
func post(t testing.TB, srv *httptest.Server, path, user, password string, form url.Values) (reply, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	return do(t, srv, req)
}

func do(t testing.TB, srv *httptest.Server, req *http.Request) (reply, string) {
	t.Helper()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, string(body)
}

// decode unmarshals a JSON body into v.
func decode(t testing.TB, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("decode %.300s: %v", body, err)
	}
}

// csrfToken reads the token a page rendered for user (its csrf-token meta
// tag; the forms' hidden csrf fields carry the same).
func csrfToken(t testing.TB, srv *httptest.Server, user, password string) string {
	t.Helper()
	_, body := get(t, srv, "/queue", user, password, false)
	const marker = `<meta name="csrf-token" content="`
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("no csrf token on /queue for %s", user)
	}
	rest := body[i+len(marker):]
	return rest[:strings.Index(rest, `"`)]
}
