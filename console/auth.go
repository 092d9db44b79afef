package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"
)

// Auth is how the console knows who asks. Both ways may be on at once: a
// request from a trusted proxy with the trusted header is taken as its
// user, any other must carry Basic credentials that match the htpasswd
// file. With neither, the console is open: every request is LocalUser, an
// operator, and the command refuses to listen anywhere but on loopback.
type Auth struct {
	// Users holds the htpasswd file's entries: name → bcrypt hash.
	Users map[string][]byte
	// TrustedUserHeader names the header an authenticating reverse proxy
	// sets to the signed-in user (oauth2-proxy's X-Forwarded-Email). It is
	// believed only from TrustedProxies, with one value, and never beside
	// Basic credentials naming someone else.
	TrustedUserHeader string
	// TrustedProxies are the addresses of the reverse proxies in front of
	// the console: the trusted header is believed only when the request's
	// TCP peer (never X-Forwarded-For) is in one of them, and for a
	// request they forward, the client (of the login limits and the log)
	// is the last address of X-Forwarded-For that is not theirs. Empty
	// means loopback for the header, and no proxy for the client.
	TrustedProxies []netip.Prefix
	// Operators may act; every other authenticated user only looks.
	Operators []string
	// ClientLimit and UserLimit bound the failed logins of one client
	// address (an IPv6 client's /64) and of one user name
	// (DefaultClientLimit and DefaultUserLimit when zero), from clients
	// without a device cookie of that user; DeviceLimit bounds those of
	// one device that signed in as the user before and presents its
	// device cookie (DefaultDeviceLimit when zero; device.go).
	ClientLimit, UserLimit, DeviceLimit LoginLimit
}

// LoginLimit is a token bucket of failed logins: Burst failures at once,
// then one more every Every. A request over the limit is answered 429
// with Retry-After before its password is even hashed. A negative Burst
// turns the limit off.
type LoginLimit struct {
	Burst int
	Every time.Duration
}

// The default limits on failed logins: a client may get its password
// wrong 10 times at once, then once every 6 seconds; a user name (the
// target of guesses from many addresses) 20 times, then once every 6
// seconds; a device that signed in as the user before, 10 times, then
// once every 6 seconds, whatever the name's limit says.
var (
	DefaultClientLimit = LoginLimit{Burst: 10, Every: 6 * time.Second}
	DefaultUserLimit   = LoginLimit{Burst: 20, Every: 6 * time.Second}
	DefaultDeviceLimit = LoginLimit{Burst: 10, Every: 6 * time.Second}
)

// LocalUser is who an open console's requests come from.
const LocalUser = "local"

// Open reports whether the console has no authentication at all.
func (a Auth) Open() bool { return len(a.Users) == 0 && a.TrustedUserHeader == "" }

// LoopbackPrefixes are the loopback networks: the trusted proxies of a
// console that sets none.
var LoopbackPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// ErrHtpasswd reports an htpasswd file the console cannot use.
var ErrHtpasswd = errors.New("htpasswd")

// bcryptHash is the whole shape of a bcrypt hash: version, two-digit
// cost, and 53 characters of bcrypt's base64 (22 of salt, 31 of hash).
// bcrypt.Cost reads only the prefix, so a truncated paste passed it and
// its user could never log in.
var bcryptHash = regexp.MustCompile(`^\$2[abxy]?\$[0-9]{2}\$[./A-Za-z0-9]{53}$`)

// ParseHtpasswd reads an htpasswd file of bcrypt entries (user:$2y$...,
// as `htpasswd -B` writes them); blank lines and # comments are skipped.
// Any other hash (MD5, SHA1, crypt, plain) is refused: they are too weak
// to keep; so is a bcrypt hash that is not whole.
func ParseHtpasswd(r io.Reader) (map[string][]byte, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHtpasswd, err)
	}
	users := map[string][]byte{}
	n := 0
	for line := range strings.Lines(string(b)) {
		n++
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hash, ok := strings.Cut(line, ":")
		if !ok || name == "" || hash == "" {
			return nil, fmt.Errorf("%w: line %d is not user:hash", ErrHtpasswd, n)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return nil, fmt.Errorf("%w: line %d (%s): not a bcrypt hash; make one with htpasswd -nB %s", ErrHtpasswd, n, name, name)
		}
		if !bcryptHash.MatchString(hash) {
			return nil, fmt.Errorf("%w: line %d (%s): the bcrypt hash is malformed (a bcrypt hash is 60 characters; was it cut?); make one with htpasswd -nB %s",
				ErrHtpasswd, n, name, name)
		}
		if _, dup := users[name]; dup {
			return nil, fmt.Errorf("%w: line %d: user %s appears twice", ErrHtpasswd, n, name)
		}
		users[name] = []byte(hash)
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("%w: no user in the file", ErrHtpasswd)
	}
	return users, nil
}

// user is who a request comes from, and whether they may act.
type user struct {
	Name     string
	Operator bool
}

// authenticator checks credentials. A bcrypt comparison costs tens of
// milliseconds by design; a browser sends the same credentials with every
// request, so the hash of a pair that matched is remembered and a repeat
// costs a map lookup (and is never limited: an operator already signed in
// keeps working while someone guesses their password).
type authenticator struct {
	Auth
	log      zerolog.Logger
	mu       sync.Mutex
	verified map[[32]byte]string // sha256(user, password, hash) → user
	// dummy is compared for an unknown user, at the cost most of the
	// file's hashes have: a wrong name takes as long as a wrong password.
	dummy []byte
	// clients and names limit the failed logins of clients without a
	// device cookie, devices those of the devices with one; hashing holds
	// one slot per comparison running, so that guesses from many
	// addresses at once leave the pages some CPU.
	clients, names, devices *limiter
	hashing                 chan struct{}
	// now is the clock the limits go by; deviceSecret is the configured
	// key the device cookies are signed with beside the user's hash
	// (empty when none is configured: device.go).
	now          func() time.Time
	deviceSecret []byte
}

// newAuthenticator returns a's authenticator, its limits going by now,
// its device cookies signed with secret (may be empty) and each user's
// htpasswd hash.
func newAuthenticator(a Auth, log zerolog.Logger, now func() time.Time, secret []byte) (*authenticator, error) {
	if a.TrustedUserHeader != "" && len(a.TrustedProxies) == 0 {
		a.TrustedProxies = LoopbackPrefixes
	}
	au := &authenticator{Auth: a, log: log, verified: map[[32]byte]string{},
		clients: newLimiter(a.ClientLimit, DefaultClientLimit), names: newLimiter(a.UserLimit, DefaultUserLimit),
		devices: newLimiter(a.DeviceLimit, DefaultDeviceLimit),
		hashing: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)), now: now, deviceSecret: secret}
	if len(a.Users) > 0 {
		var err error
		if au.dummy, err = bcrypt.GenerateFromPassword([]byte("engagement-console unknown user"), commonCost(a.Users)); err != nil {
			return nil, fmt.Errorf("console: the unknown users' hash: %w", err)
		}
	}
	return au, nil
}

// commonCost is the cost most of users' hashes have (the higher of two as
// common).
func commonCost(users map[string][]byte) int {
	count := map[int]int{}
	best := bcrypt.DefaultCost
	for _, h := range users {
		c, err := bcrypt.Cost(h)
		if err != nil {
			continue
		}
		count[c]++
		if count[c] > count[best] || count[c] == count[best] && c > best {
			best = c
		}
	}
	return best
}

// refusal is why a request is not let in: its status and message, and
// when it may try again (429).
type refusal struct {
	code       int
	msg        string
	retryAfter time.Duration
}

// identify returns the request's user, and the device cookie to set on
// its response (nil for none), or why it is refused.
func (a *authenticator) identify(r *http.Request) (user, *http.Cookie, *refusal) {
	if a.Open() {
		return user{Name: LocalUser, Operator: true}, nil, nil
	}
	peer := peerAddr(r)
	client := a.client(r, peer)
	name := ""
	if a.TrustedUserHeader != "" {
		values := r.Header.Values(a.TrustedUserHeader)
		if len(values) > 0 && !a.trusted(peer) {
			a.log.Warn().Str("client", client.String()).Str("header", a.TrustedUserHeader).
				Msg("login refused: the trusted user header from an address that is not a trusted proxy")
			return user{}, nil, &refusal{code: http.StatusUnauthorized, msg: a.TrustedUserHeader + " is accepted only from the trusted proxy"}
		}
		if len(values) > 1 || len(values) == 1 && strings.Contains(values[0], ",") {
			a.log.Warn().Str("client", client.String()).Str("header", a.TrustedUserHeader).
				Msg("login refused: the trusted user header names more than one user")
			return user{}, nil, &refusal{code: http.StatusBadRequest, msg: a.TrustedUserHeader + " must name one user"}
		}
		if len(values) == 1 {
			name = strings.TrimSpace(values[0])
		}
		if basic, _, ok := r.BasicAuth(); ok && name != "" && basic != name {
			a.log.Warn().Str("client", client.String()).Str("user", name).
				Msg("login refused: Basic credentials of another user beside the trusted user header")
			return user{}, nil, &refusal{code: http.StatusBadRequest, msg: "the request names two users: Basic credentials and " + a.TrustedUserHeader}
		}
	}
	var cookie *http.Cookie
	if name == "" && len(a.Users) > 0 {
		u, p, ok := r.BasicAuth()
		if !ok {
			return user{}, nil, &refusal{code: http.StatusUnauthorized, msg: "authentication required"}
		}
		var no *refusal
		if cookie, no = a.check(r, client, u, p); no != nil {
			return user{}, nil, no
		}
		name = u
	}
	if name == "" {
		return user{}, nil, &refusal{code: http.StatusUnauthorized, msg: "authentication required"}
	}
	return user{Name: name, Operator: slices.Contains(a.Operators, name)}, cookie, nil
}

// check compares a Basic auth pair with the htpasswd entry, within the
// limits on failed logins, and logs a failure: one line with the user
// and the client's address, never the password. A request presenting a
// device cookie of the user (device.go) is limited by that device's
// failures only; any other by its address's and the user name's. On a
// match, it returns the device cookie to set (nil when the request's is
// fresh).
func (a *authenticator) check(r *http.Request, client netip.Addr, name, password string) (*http.Cookie, *refusal) {
	hash, known := a.Users[name]
	key := sha256.Sum256([]byte(name + "\x00" + password + "\x00" + string(hash)))
	now := a.now()
	macHash := hash
	if !known {
		macHash = a.dummy
	}
	dev, trusted := a.trustedDevice(r, name, macHash, now)
	trusted = trusted && known
	if known {
		a.mu.Lock()
		_, seen := a.verified[key]
		a.mu.Unlock()
		if seen {
			return a.deviceCookie(r, dev, trusted, name, now), nil
		}
	}
	taken, no := a.reserve(client, name, dev, trusted, now)
	if no != nil {
		return nil, no
	}
	select {
	case a.hashing <- struct{}{}:
	case <-r.Context().Done():
		taken.cancel(now)
		return nil, &refusal{code: http.StatusServiceUnavailable, msg: "the request ended before its credentials were checked"}
	}
	var err error
	if known {
		err = bcrypt.CompareHashAndPassword(hash, []byte(password))
	} else {
		// The same time as a wrong password, so that a probe cannot
		// tell which names exist.
		_ = bcrypt.CompareHashAndPassword(a.dummy, []byte(password))
		err = bcrypt.ErrMismatchedHashAndPassword
	}
	<-a.hashing
	if err != nil {
		a.log.Warn().Str("client", client.String()).Str("user", logName(name)).Bool("known_device", trusted).Msg("login failed")
		return nil, &refusal{code: http.StatusUnauthorized, msg: "authentication required"}
	}
	// A match gives the tokens back (as of when they were taken: rate
	// restores nothing for a reservation whose time has passed).
	taken.cancel(now)
	a.mu.Lock()
	if len(a.verified) > 1024 { // a bound, not a cache policy: a few operators use it
		clear(a.verified)
	}
	a.verified[key] = name
	a.mu.Unlock()
	return a.deviceCookie(r, dev, trusted, name, now), nil
}

// reservations are the tokens one login took, one per limit it is under.
type reservations []reservation

func (rs reservations) cancel(now time.Time) {
	for _, r := range rs {
		r.cancel(now)
	}
}

// reserve takes a token of each limit a login is under: its device's,
// when trusted; else its address's and its user name's. Over one of them,
// it takes none and says why.
func (a *authenticator) reserve(client netip.Addr, name string, dev device, trusted bool, now time.Time) (reservations, *refusal) {
	if trusted {
		byDevice, wait := a.devices.reserve(deviceKey(name, dev), now)
		if wait > 0 {
			a.throttled(byDevice, client, name, wait, "device")
			return nil, &refusal{code: http.StatusTooManyRequests, msg: "too many failed logins from this device; try again later", retryAfter: wait}
		}
		return reservations{byDevice}, nil
	}
	byClient, wait := a.clients.reserve(clientKey(client), now)
	if wait > 0 {
		a.throttled(byClient, client, name, wait, "client")
		return nil, &refusal{code: http.StatusTooManyRequests, msg: "too many failed logins from this address; try again later", retryAfter: wait}
	}
	byName, wait := a.names.reserve(limitName(name), now)
	if wait > 0 {
		byClient.cancel(now)
		a.throttled(byName, client, name, wait, "user")
		return nil, &refusal{code: http.StatusTooManyRequests, retryAfter: wait,
			msg: "too many failed logins for this user; try again later, or from a device that signed in as this user before"}
	}
	return reservations{byClient, byName}, nil
}

// throttled logs the first refusal of a run of them (a client or user
// over its limit): one line, not one per request, however fast they come.
func (a *authenticator) throttled(res reservation, client netip.Addr, name string, wait time.Duration, by string) {
	if !res.firstRefusal {
		return
	}
	a.log.Warn().Str("client", client.String()).Str("user", logName(name)).Str("limit", by).
		Dur("retry_after", wait.Round(time.Second)).Msg("login throttled: too many failed logins")
}

// logName is a user name as the log shows it: what a client sent, so cut
// to a length a name has.
func logName(name string) string {
	if len(name) > 64 {
		return strings.ToValidUTF8(name[:64], "") + "…"
	}
	return name
}

// limitName is the key of name's limit, bounded in size.
func limitName(name string) string {
	if len(name) > 256 {
		return name[:256]
	}
	return name
}

// peerAddr is the request's TCP peer, unmapped (a v4-mapped IPv6 address
// is its IPv4 one); the zero Addr when RemoteAddr is not an address.
func peerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		addr, _ := netip.ParseAddr(r.RemoteAddr)
		return addr.Unmap()
	}
	return ap.Addr().Unmap()
}

// trusted reports whether addr is one of the trusted proxies.
func (a *authenticator) trusted(addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	for _, p := range a.TrustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// client is who a request comes from, for the limits and the log: the
// peer, or, when the peer is a trusted proxy, the last address of
// X-Forwarded-For that is not a trusted proxy's (what the proxy appended;
// whatever came before it is the client's to make up).
func (a *authenticator) client(r *http.Request, peer netip.Addr) netip.Addr {
	if !a.trusted(peer) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		addr, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer
		}
		if addr = addr.Unmap(); !a.trusted(addr) {
			return addr
		}
	}
	return peer
}

// clientKey is the key of a client's limit: its IPv4 address, or its
// IPv6 /64 (one host's usual share).
func clientKey(addr netip.Addr) string {
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

// limiter is a token bucket of failed logins per key (golang.org/x/time/rate).
// It holds at most maxKeys keys: past that, the keys back at a full
// bucket are dropped, and if that is not enough, all of them (a bound
// on memory, which an attack with that many addresses resets).
type limiter struct {
	limit LoginLimit
	mu    sync.Mutex
	keys  map[string]*bucket
}

type bucket struct {
	lim *rate.Limiter
	// refusing is set by the first refusal of a run, cleared by the next
	// failure let through: the log says once that a key is over its limit.
	refusing bool
}

const maxKeys = 10000

func newLimiter(l, def LoginLimit) *limiter {
	if l == (LoginLimit{}) {
		l = def
	}
	if l.Every <= 0 {
		l.Every = def.Every
	}
	return &limiter{limit: l, keys: map[string]*bucket{}}
}

// reservation is one failed login's token, taken before the password is
// hashed and given back (cancel) when it matched.
type reservation struct {
	r            *rate.Reservation
	firstRefusal bool
}

func (r reservation) cancel(now time.Time) {
	if r.r != nil {
		r.r.CancelAt(now)
	}
}

// reserve takes a token of key's bucket, or says how long until one is
// there (and takes none).
func (l *limiter) reserve(key string, now time.Time) (reservation, time.Duration) {
	if l.limit.Burst < 0 {
		return reservation{}, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.keys[key]
	if !ok {
		if len(l.keys) >= maxKeys {
			for k, b := range l.keys {
				if b.lim.TokensAt(now) >= float64(l.limit.Burst) {
					delete(l.keys, k)
				}
			}
			if len(l.keys) >= maxKeys {
				clear(l.keys)
			}
		}
		b = &bucket{lim: rate.NewLimiter(rate.Every(l.limit.Every), l.limit.Burst)}
		l.keys[key] = b
	}
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 || !r.OK() {
		r.CancelAt(now)
		first := !b.refusing
		b.refusing = true
		if !r.OK() {
			d = l.limit.Every
		}
		return reservation{firstRefusal: first}, d
	}
	b.refusing = false
	return reservation{r: r}, 0
}

// csrf makes and checks the token every form that acts carries: an HMAC of
// the user's name under a key of this process (or the configured one, so
// that several replicas accept each other's forms). A page rendered for
// one user is no use to another, and a forged form from elsewhere has no
// token at all.
type csrf struct{ key []byte }

func newCSRF(key []byte) (csrf, error) {
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return csrf{}, err
		}
	}
	return csrf{key: key}, nil
}

func (c csrf) token(name string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("engagement-console csrf\x00" + name))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (c csrf) valid(name, token string) bool {
	want := c.token(name)
	return token != "" && subtle.ConstantTimeCompare([]byte(want), []byte(token)) == 1
}
