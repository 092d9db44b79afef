package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/syncbuf"
)

// noLimit turns a limit on failed logins off, for tests that fail logins
// on purpose and count on 401s.
var noLimit = console.LoginLimit{Burst: -1}

// syncBuffer is a log the server writes from its handlers' goroutines.
type syncBuffer struct{ syncbuf.Buffer }

func (b *syncBuffer) lines(message string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, `"message":"`+message+`"`) {
			out = append(out, l)
		}
	}
	return out
}

// newConsole is console.New with auth over a fresh database, logging to
// the returned buffer.
func newConsole(t *testing.T, auth console.Auth) (*console.Console, *syncBuffer) {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	log := &syncBuffer{}
	h, err := console.New(console.Config{Pool: pool, Auth: auth, Logger: zerolog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	return h, log
}

// from serves req as if it came from addr (the TCP peer), through h
// itself, and returns the status and the response.
func from(h http.Handler, addr string, req *http.Request) *httptest.ResponseRecorder {
	req.RemoteAddr = addr
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Issue 41, finding 2: the trusted header was believed from anyone.
func TestTrustedHeaderOnlyFromATrustedProxy(t *testing.T) {
	t.Parallel()
	h, _ := newConsole(t, console.Auth{Users: htpasswd(t), TrustedUserHeader: "X-Forwarded-Email",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::/64")},
		Operators:      []string{"ana@example.com"}})
	for _, tc := range []struct {
		peer   string
		values []string
		basic  [2]string
		code   int
	}{
		{"10.1.2.3:5555", []string{"ana@example.com"}, [2]string{}, http.StatusOK},
		{"[fd00::7]:5555", []string{"ana@example.com"}, [2]string{}, http.StatusOK},
		{"[::ffff:10.1.2.3]:5555", []string{"ana@example.com"}, [2]string{}, http.StatusOK},
		{"10.2.0.1:5555", []string{"ana@example.com"}, [2]string{}, http.StatusUnauthorized},
		{"127.0.0.1:5555", []string{"ana@example.com"}, [2]string{}, http.StatusUnauthorized},
		// Only the TCP peer counts, not what a client writes in X-Forwarded-For.
		{"203.0.113.9:5555", []string{"ana@example.com"}, [2]string{"X-Forwarded-For", "10.1.2.3"}, http.StatusUnauthorized},
		// From an untrusted address, the header refuses even good credentials.
		{"203.0.113.9:5555", []string{"ana@example.com"}, [2]string{operator, operatorPassword}, http.StatusUnauthorized},
		{"10.1.2.3:5555", []string{"ana@example.com", "mallory@example.com"}, [2]string{}, http.StatusBadRequest},
		{"10.1.2.3:5555", []string{"mallory@example.com,ana@example.com"}, [2]string{}, http.StatusBadRequest},
		{"10.1.2.3:5555", []string{"ana@example.com"}, [2]string{viewer, viewerPassword}, http.StatusBadRequest},
		{"10.1.2.3:5555", []string{"ana@example.com"}, [2]string{"ana@example.com", "whatever the proxy passes"}, http.StatusOK},
		// No header: Basic auth, from anywhere.
		{"203.0.113.9:5555", nil, [2]string{operator, operatorPassword}, http.StatusOK},
		{"10.1.2.3:5555", []string{""}, [2]string{operator, operatorPassword}, http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodGet, "/audit", nil)
		for _, v := range tc.values {
			req.Header.Add("X-Forwarded-Email", v)
		}
		switch tc.basic[0] {
		case "":
		case "X-Forwarded-For":
			req.Header.Set(tc.basic[0], tc.basic[1])
		default:
			req.SetBasicAuth(tc.basic[0], tc.basic[1])
		}
		rec := from(h, tc.peer, req)
		if rec.Code != tc.code {
			t.Errorf("from %s, X-Forwarded-Email %q, %v: %d, want %d: %.200s", tc.peer, tc.values, tc.basic, rec.Code, tc.code, rec.Body)
		}
		if tc.code != http.StatusOK && strings.Contains(rec.Body.String(), "csrf") {
			t.Errorf("from %s, X-Forwarded-Email %q: the refusal carries a CSRF token", tc.peer, tc.values)
		}
	}
}

// With no TrustedProxies, loopback is the proxy (the command refuses to
// start so anywhere else).
func TestTrustedHeaderDefaultsToLoopback(t *testing.T) {
	t.Parallel()
	h, _ := newConsole(t, console.Auth{TrustedUserHeader: "X-Forwarded-Email"})
	for peer, want := range map[string]int{"127.0.0.1:1": http.StatusOK, "[::1]:1": http.StatusOK, "192.0.2.1:1": http.StatusUnauthorized} {
		req := httptest.NewRequest(http.MethodGet, "/audit", nil)
		req.Header.Set("X-Forwarded-Email", "ana@example.com")
		if rec := from(h, peer, req); rec.Code != want {
			t.Errorf("from %s: %d, want %d", peer, rec.Code, want)
		}
	}
}

// median is the middle of ds (sorted in place).
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// Issue 41, finding 3: an unknown user took 255 ms (a dummy bcrypt at cost
// 10), a known user's wrong password 11 ms (the cost-5 hashes htpasswd -nB
// writes): the time said who exists. 200 tries of each, interleaved, over
// HTTP: their medians must be alike (within 2x either way; the gap was
// about 20x).
func TestUnknownUserAndWrongPasswordTakeAlike(t *testing.T) {
	t.Parallel()
	hash, err := bcrypt.GenerateFromPassword([]byte(operatorPassword), 5) // htpasswd -nB's cost
	if err != nil {
		t.Fatal(err)
	}
	users, err := console.ParseHtpasswd(strings.NewReader(operator + ":" + string(hash)))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := newConsole(t, console.Auth{Users: users, ClientLimit: noLimit, UserLimit: noLimit})
	srv := httptestServer(t, h)
	timed := func(name, password string) time.Duration {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/audit", nil)
		req.SetBasicAuth(name, password)
		start := time.Now()
		resp, _ := do(t, srv, req)
		took := time.Since(start)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s with a wrong password: %d, want 401", name, resp.StatusCode)
		}
		return took
	}
	const tries = 200
	var unknown, wrong []time.Duration
	for i := range tries {
		unknown = append(unknown, timed("nobody-"+strconv.Itoa(i), "guess"))
		wrong = append(wrong, timed(operator, "guess"))
	}
	mu, mw := median(unknown), median(wrong)
	ratio := float64(mu) / float64(mw)
	t.Logf("median over %d tries: unknown user %s, wrong password %s (ratio %.2f)", tries, mu, mw, ratio)
	if ratio < 0.5 || ratio > 2 {
		t.Errorf("an unknown user takes %s, a wrong password %s (median of %d): the time tells who exists", mu, mw, tries)
	}
}

// Issue 41, finding 3: 2,000 wrong passwords went through in 18.5 s, none
// logged. A client gets Burst tries, then 429 with Retry-After, answered
// without hashing; a user name gets its own limit, whatever the address;
// a signed-in session keeps working; each failure is one log line.
func TestFailedLoginsAreLimitedAndLogged(t *testing.T) {
	t.Parallel()
	// Cost 10: a comparison takes a noticeable time, so that the test can
	// tell a refusal that hashed from one that did not.
	hash, err := bcrypt.GenerateFromPassword([]byte(operatorPassword), 10)
	if err != nil {
		t.Fatal(err)
	}
	viewerHash, err := bcrypt.GenerateFromPassword([]byte(viewerPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string][]byte{operator: hash, viewer: viewerHash}
	h, log := newConsole(t, console.Auth{Users: users,
		ClientLimit: console.LoginLimit{Burst: 3, Every: time.Hour}, UserLimit: console.LoginLimit{Burst: 5, Every: time.Hour}})
	login := func(peer, name, password string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/audit", nil)
		req.SetBasicAuth(name, password)
		return from(h, peer, req)
	}

	// The operator signs in first: the session is remembered.
	if rec := login("192.0.2.50:1", operator, operatorPassword); rec.Code != http.StatusOK {
		t.Fatalf("ops signing in: %d %s", rec.Code, rec.Body)
	}
	// One client: 3 failures, then 429.
	for i := range 3 {
		if rec := login("203.0.113.1:1", operator, "guess-"+strconv.Itoa(i)); rec.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d of client 203.0.113.1: %d, want 401", i+1, rec.Code)
		}
	}
	start := time.Now()
	const throttled = 20
	for i := range throttled {
		rec := login("203.0.113.1:1", viewer, "guess-"+strconv.Itoa(i))
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("try %d of client 203.0.113.1 over its limit: %d, want 429", i+4, rec.Code)
		}
		if s, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || s < 1 || s > 3600 {
			t.Fatalf("429's Retry-After %q, want seconds up to an hour", rec.Header().Get("Retry-After"))
		}
	}
	tookThrottled := time.Since(start)
	start = time.Now()
	_ = bcrypt.CompareHashAndPassword(hash, []byte("guess"))
	oneHash := time.Since(start)
	if tookThrottled > oneHash {
		t.Errorf("%d refusals over the limit took %s, more than one bcrypt comparison (%s): they hash", throttled, tookThrottled, oneHash)
	}
	// Even the right password waits for the client's limit.
	if rec := login("203.0.113.1:1", viewer, viewerPassword); rec.Code != http.StatusTooManyRequests {
		t.Errorf("the right password from a client over its limit: %d, want 429", rec.Code)
	}
	// One user from many addresses: 5 failures in all, then 429 from anywhere.
	for i, peer := range []string{"198.51.100.1:1", "198.51.100.2:1"} {
		if rec := login(peer, operator, "guess"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d of ops: %d, want 401", i+4, rec.Code)
		}
	}
	if rec := login("198.51.100.3:1", operator, "guess"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("ops's 6th failure, from a fresh address: %d, want 429", rec.Code)
	}
	// An IPv6 client's /64 is one client.
	for i := range 3 {
		if rec := login("[2001:db8:1:2::"+strconv.Itoa(i+1)+"]:1", "nobody", "guess"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d of 2001:db8:1:2::/64: %d, want 401", i+1, rec.Code)
		}
	}
	if rec := login("[2001:db8:1:2::99]:1", "nobody", "guess"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("another address of the same /64 over its limit: %d, want 429", rec.Code)
	}
	// Others are not held up, and the signed-in operator keeps working.
	if rec := login("198.51.100.9:1", viewer, viewerPassword); rec.Code != http.StatusOK {
		t.Errorf("viewer from another address: %d, want 200", rec.Code)
	}
	if rec := login("192.0.2.50:1", operator, operatorPassword); rec.Code != http.StatusOK {
		t.Errorf("ops's signed-in session while ops is over the limit: %d, want 200", rec.Code)
	}

	failed := log.lines("login failed")
	if len(failed) != 3+2+3 {
		t.Errorf("%d login failed lines, want 8 (one per failure that was checked):\n%s", len(failed), strings.Join(failed, "\n"))
	}
	for _, want := range []string{`"client":"203.0.113.1","user":"ops"`, `"client":"198.51.100.2","user":"ops"`, `"client":"2001:db8:1:2::3","user":"nobody"`} {
		if !slices.ContainsFunc(failed, func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("no login failed line with %s:\n%s", want, strings.Join(failed, "\n"))
		}
	}
	if n := len(log.lines("login throttled: too many failed logins")); n != 3 {
		t.Errorf("%d login throttled lines, want 3 (client 203.0.113.1, user ops, the /64), not one per refusal", n)
	}
	all := log.String()
	if strings.Contains(all, "guess") || strings.Contains(all, operatorPassword) {
		t.Errorf("a password reached the log:\n%s", all)
	}
}

// Behind a trusted proxy, the client is what the proxy appended to
// X-Forwarded-For, not the proxy (whose address all clients share) nor
// what a client wrote there before it.
func TestTheClientBehindATrustedProxy(t *testing.T) {
	t.Parallel()
	h, log := newConsole(t, console.Auth{Users: htpasswd(t), TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	req := httptest.NewRequest(http.MethodGet, "/audit", nil)
	req.SetBasicAuth(operator, "guess")
	req.Header.Add("X-Forwarded-For", "192.0.2.1, 203.0.113.7")
	req.Header.Add("X-Forwarded-For", "10.0.0.2")
	from(h, "10.0.0.1:1", req)
	req = httptest.NewRequest(http.MethodGet, "/audit", nil)
	req.SetBasicAuth(operator, "guess")
	req.Header.Set("X-Forwarded-For", "10.9.9.9")
	from(h, "203.0.113.200:1", req)
	failed := log.lines("login failed")
	if len(failed) != 2 || !strings.Contains(failed[0], `"client":"203.0.113.7"`) || !strings.Contains(failed[1], `"client":"203.0.113.200"`) {
		t.Errorf("login failed lines %q, want clients 203.0.113.7 (behind the proxy) and 203.0.113.200 (direct)", failed)
	}
}

// Issue 41, finding 5: bcrypt.Cost reads only the prefix, so a truncated
// or mangled hash was accepted and its user could never log in.
func TestParseHtpasswdRefusesAMalformedHash(t *testing.T) {
	t.Parallel()
	good, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	g := string(good)
	for name, entry := range map[string]string{
		"truncated":       g[:59],
		"too long":        g + "x",
		"a bad character": g[:30] + "!" + g[31:],
		"no hash":         g[:7],
	} {
		_, err := console.ParseHtpasswd(strings.NewReader("ops:" + g + "\n\nviewer:" + entry + "\n"))
		if err == nil || !strings.Contains(err.Error(), "line 3 (viewer)") {
			t.Errorf("%s: %v, want an error naming line 3 (viewer)", name, err)
		}
	}
	for _, prefix := range []string{"$2a$", "$2b$", "$2y$"} {
		if _, err := console.ParseHtpasswd(strings.NewReader("ops:" + prefix + g[4:])); err != nil {
			t.Errorf("a whole %s hash: %v", prefix, err)
		}
	}
}

// Issue 41, finding 5: /assets/ listed its folders, and the assets of an
// authenticated console were Cache-Control: public.
func TestAssetsListNothingAndArePrivateBehindAuth(t *testing.T) {
	t.Parallel()
	h, _ := newConsole(t, console.Auth{Users: htpasswd(t)})
	open, _ := newConsole(t, console.Auth{})
	for _, path := range []string{"/assets/", "/assets/uplot/", "/assets/uplot", "/assets/nope.js"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.SetBasicAuth(operator, operatorPassword)
		if rec := from(h, "127.0.0.1:1", req); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404: %.200s", path, rec.Code, rec.Body)
		}
	}
	for _, tc := range []struct {
		h    http.Handler
		want string
	}{{h, "private"}, {open, "public"}} {
		req := httptest.NewRequest(http.MethodGet, "/assets/console.js", nil)
		req.SetBasicAuth(operator, operatorPassword)
		rec := from(tc.h, "127.0.0.1:1", req)
		if cc := rec.Header().Get("Cache-Control"); rec.Code != http.StatusOK || !strings.HasPrefix(cc, tc.want+",") {
			t.Errorf("GET /assets/console.js: %d, Cache-Control %q, want 200 %s", rec.Code, cc, tc.want)
		}
	}
}
