package console_test

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// fakeClock is a wall clock a test moves by hand (Config.Clock).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// proxied is a console behind a trusted proxy (10.0.0.0/8), as the
// binary runs with --trusted-proxy: a test names each request's client
// in X-Forwarded-For, as the proxy does.
type proxied struct {
	t   *testing.T
	cfg console.Config
	h   http.Handler
}

// newProxied returns the console over a fresh database, ops an operator,
// going by clock.
func newProxied(t *testing.T, clock *fakeClock, auth console.Auth) *proxied {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	auth.Users = htpasswd(t)
	auth.Operators = []string{operator}
	auth.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	p := &proxied{t: t, cfg: console.Config{Pool: pool, Auth: auth, Clock: clock.Now, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)}}
	p.restart()
	return p
}

// restart is a new process of the console with the same flags (a
// deploy): it remembers no sign-in and no failure.
func (p *proxied) restart() {
	p.t.Helper()
	h, err := console.New(p.cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	p.h = h
}

// login is GET /audit from client as name with password, presenting
// cookies.
func (p *proxied) login(client, name, password string, cookies []*http.Cookie) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/audit", nil)
	req.SetBasicAuth(name, password)
	req.Header.Set("X-Forwarded-For", client)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	return from(p.h, "10.0.0.1:40000", req)
}

// Issue 56, finding 6: 25 guesses for ops from 25 addresses, then one
// every 1–5 s from rotating addresses, and the real operator's right
// password got 429 in 12 of 12 tries over 60 s: the limit per user name,
// which the guesser keeps empty, was the operator's too. The operator's
// laptop signed in the day before, and the console restarted since (a
// deploy: the process remembers no sign-in), so all that is left of it is
// the device cookie. With it, the laptop has its own allowance (OWASP's
// device cookies): it gets in every time; the guesser still gets 429; and
// a new device, without a cookie, waits like the guesser.
func TestAGuesserFromManyAddressesDoesNotLockOutTheOperatorsDevice(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: start.Add(-24 * time.Hour)}
	c := newProxied(t, clock, console.Auth{})

	const laptopAddr = "198.51.100.10"
	rec := c.login(laptopAddr, operator, operatorPassword, nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("ops signing in the day before: %d %s", rec.Code, rec.Body)
	}
	laptop := rec.Result().Cookies()
	if len(laptop) == 0 {
		t.Errorf("signing in set no device cookie")
	}
	c.restart()
	clock.Set(start)

	guesser := 0
	guess := func() int {
		guesser++
		addr := "203.0.113." + strconv.Itoa(guesser%250+1)
		return c.login(addr, operator, "guess-"+strconv.Itoa(guesser), nil).Code
	}
	codes := map[int]int{}
	for range 25 {
		codes[guess()]++
	}
	if codes[http.StatusUnauthorized] > console.DefaultUserLimit.Burst || codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("25 guesses for ops from 25 addresses: %v, want at most %d answered 401, the rest 429", codes, console.DefaultUserLimit.Burst)
	}
	// A device that never signed in waits as the guesser does.
	if rec := c.login("192.0.2.77", operator, operatorPassword, nil); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("the right password from a new device during the attack: %d (Retry-After %q), want 429 with Retry-After",
			rec.Code, rec.Header().Get("Retry-After"))
	}

	// 60 s: a guess every 1–5 s from a rotating address, the operator's
	// laptop every 5 s.
	rng := rand.New(rand.NewPCG(56, 6)) //nolint:gosec // a repeatable schedule, not a secret
	nextGuess, nextOps := start.Add(time.Duration(1+rng.IntN(5))*time.Second), start.Add(5*time.Second)
	guesses := map[int]int{}
	opsTries, opsIn := 0, 0
	for !nextOps.After(start.Add(60*time.Second)) || !nextGuess.After(start.Add(60*time.Second)) {
		if nextGuess.Before(nextOps) {
			clock.Set(nextGuess)
			guesses[guess()]++
			nextGuess = nextGuess.Add(time.Duration(1+rng.IntN(5)) * time.Second)
			continue
		}
		clock.Set(nextOps)
		opsTries++
		rec := c.login(laptopAddr, operator, operatorPassword, laptop)
		if rec.Code == http.StatusOK {
			opsIn++
		} else {
			t.Errorf("ops from the laptop at +%s: %d (Retry-After %s), want 200", nextOps.Sub(start), rec.Code, rec.Header().Get("Retry-After"))
		}
		nextOps = nextOps.Add(5 * time.Second)
	}
	t.Logf("over 60 s: ops got in %d of %d times; the guesser's %d guesses: %v", opsIn, opsTries, guesser-25, guesses)
	if opsTries != 12 {
		t.Errorf("ops tried %d times, want 12", opsTries)
	}
	// The name's limit refills one guess every 6 s: 10 in 60 s, and the
	// rest are 429.
	if max401 := int(60*time.Second/console.DefaultUserLimit.Every) + 1; guesses[http.StatusUnauthorized] > max401 || guesses[http.StatusTooManyRequests] < guesser-25-max401 {
		t.Errorf("the guesser's guesses over 60 s: %v, want at most %d answered 401, the rest 429", guesses, max401)
	}
}

// signIn signs name in from client and returns the device cookie the
// console set.
func (p *proxied) signIn(client, name, password string) []*http.Cookie {
	p.t.Helper()
	rec := p.login(client, name, password, nil)
	if rec.Code != http.StatusOK {
		p.t.Fatalf("%s signing in from %s: %d %s", name, client, rec.Code, rec.Body)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		p.t.Fatalf("%s signing in from %s set %d cookies, want the device cookie", name, client, len(cookies))
	}
	return cookies
}

// A device that signed in before keeps an allowance of its own, and its
// own failures lock it, not the user: its wrong passwords do not spend the
// name's limit, and another device of the user still gets in. A cookie
// that is not the console's for that user (tampered, another user's,
// 180 days old, or signed before the key changed) is no device at all.
func TestATrustedDeviceIsLockedByItsOwnFailures(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)}
	c := newProxied(t, clock, console.Auth{DeviceLimit: console.LoginLimit{Burst: 3, Every: time.Hour},
		UserLimit: console.LoginLimit{Burst: 5, Every: time.Hour}})
	laptop := c.signIn("198.51.100.10", operator, operatorPassword)
	phone := c.signIn("198.51.100.20", operator, operatorPassword)
	viewers := c.signIn("198.51.100.30", viewer, viewerPassword)
	if cookie := laptop[0]; !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Path != "/" || cookie.Secure ||
		cookie.MaxAge < 30*24*3600 || strings.Contains(cookie.Value, operator) {
		t.Errorf("device cookie %s: want HttpOnly, SameSite=Lax, Path=/, not Secure over plain HTTP, kept for months, without the user's name", cookie)
	}
	// Through a proxy that terminated TLS, it is Secure.
	req := httptest.NewRequest(http.MethodGet, "/audit", nil)
	req.SetBasicAuth(operator, operatorPassword)
	req.Header.Set("X-Forwarded-For", "198.51.100.40")
	req.Header.Set("X-Forwarded-Proto", "https")
	if cookies := from(c.h, "10.0.0.1:40000", req).Result().Cookies(); len(cookies) != 1 || !cookies[0].Secure {
		t.Errorf("a sign-in over HTTPS at the proxy set %v, want one Secure cookie", cookies)
	}
	// A device whose cookie is fresh is not sent a new one.
	if rec := c.login("198.51.100.10", operator, operatorPassword, laptop); len(rec.Result().Cookies()) != 0 {
		t.Errorf("a signed-in device with a fresh cookie got %v, want none", rec.Result().Cookies())
	}

	c.restart() // nothing remembered: every login below is checked
	for i := range 3 {
		if rec := c.login("198.51.100.10", operator, "typo-"+strconv.Itoa(i), laptop); rec.Code != http.StatusUnauthorized {
			t.Fatalf("the laptop's wrong password %d: %d, want 401", i+1, rec.Code)
		}
	}
	for _, password := range []string{"typo-4", operatorPassword} {
		if rec := c.login("198.51.100.10", operator, password, laptop); rec.Code != http.StatusTooManyRequests {
			t.Errorf("the laptop over its own limit, password %q: %d, want 429", password, rec.Code)
		}
	}
	// The laptop spent none of the name's limit: 5 guesses from
	// elsewhere are checked, the 6th is 429.
	for i := range 5 {
		if rec := c.login("203.0.113."+strconv.Itoa(i+1), operator, "guess", nil); rec.Code != http.StatusUnauthorized {
			t.Fatalf("guess %d for ops from a new address: %d, want 401", i+1, rec.Code)
		}
	}
	tampered := []*http.Cookie{{Name: phone[0].Name, Value: strings.ToUpper(phone[0].Value[:1]) + strings.ToLower(phone[0].Value[1:])}} //nolint:gosec // a client's cookie, changed on purpose
	for name, cookies := range map[string][]*http.Cookie{"no cookie": nil, "viewer's cookie": viewers, "a tampered cookie": tampered} {
		if rec := c.login("203.0.113.99", operator, operatorPassword, cookies); rec.Code != http.StatusTooManyRequests {
			t.Errorf("ops's right password with %s while the name is over its limit: %d, want 429", name, rec.Code)
		}
	}
	if rec := c.login("198.51.100.20", operator, operatorPassword, phone); rec.Code != http.StatusOK {
		t.Errorf("ops's phone while the laptop and the name are over their limits: %d, want 200", rec.Code)
	}

	// A sign-in a day later renews the cookie; 180 days after it was
	// issued, and with another --csrf-key, it is no device.
	day := clock.Now().Add(24 * time.Hour)
	clock.Set(day)
	if rec := c.login("198.51.100.20", operator, operatorPassword, phone); len(rec.Result().Cookies()) != 1 {
		t.Errorf("a sign-in a day after the cookie was issued set %v, want it renewed", rec.Result().Cookies())
	}
	key := c.cfg.CSRFKey
	for _, tc := range []struct {
		name string
		at   time.Time
		key  []byte
		want int
	}{
		{"179 days later", day.Add(178 * 24 * time.Hour), key, http.StatusOK},
		{"181 days later", day.Add(180 * 24 * time.Hour), key, http.StatusTooManyRequests},
		{"with another --csrf-key", day, []byte("another key of at least 32 characters...."), http.StatusTooManyRequests},
	} {
		clock.Set(tc.at)
		c.cfg.CSRFKey = tc.key
		c.restart()
		for i := range 5 {
			c.login("203.0.113."+strconv.Itoa(i+1), operator, "guess", nil)
		}
		if rec := c.login("198.51.100.20", operator, operatorPassword, phone); rec.Code != tc.want {
			t.Errorf("the phone's first cookie %s, while the name is over its limit: %d, want %d", tc.name, rec.Code, tc.want)
		}
	}
}
