package console

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Auth is how the console knows who asks. Both ways may be on at once: a
// request with the trusted header is taken as its user, any other must
// carry Basic credentials that match the htpasswd file. With neither, the
// console is open: every request is LocalUser, an operator, and the
// command refuses to listen anywhere but on loopback.
type Auth struct {
	// Users holds the htpasswd file's entries: name → bcrypt hash.
	Users map[string][]byte
	// TrustedUserHeader names the header an authenticating reverse proxy
	// sets to the signed-in user (oauth2-proxy's X-Forwarded-Email). Only
	// safe when nothing but that proxy can reach the console.
	TrustedUserHeader string
	// Operators may act; every other authenticated user only looks.
	Operators []string
}

// LocalUser is who an open console's requests come from.
const LocalUser = "local"

// Open reports whether the console has no authentication at all.
func (a Auth) Open() bool { return len(a.Users) == 0 && a.TrustedUserHeader == "" }

// ErrHtpasswd reports an htpasswd file the console cannot use.
var ErrHtpasswd = errors.New("htpasswd")

// ParseHtpasswd reads an htpasswd file of bcrypt entries (user:$2y$...,
// as `htpasswd -B` writes them); blank lines and # comments are skipped.
// Any other hash (MD5, SHA1, crypt, plain) is refused: they are too weak
// to keep.
func ParseHtpasswd(r io.Reader) (map[string][]byte, error) {
	users := map[string][]byte{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
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
		if _, dup := users[name]; dup {
			return nil, fmt.Errorf("%w: line %d: user %s appears twice", ErrHtpasswd, n, name)
		}
		users[name] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHtpasswd, err)
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
// costs a map lookup.
type authenticator struct {
	Auth
	mu       sync.Mutex
	verified map[[32]byte]string // sha256(user, password, hash) → user
}

func newAuthenticator(a Auth) *authenticator {
	return &authenticator{Auth: a, verified: map[[32]byte]string{}}
}

// identify returns the request's user, or false when it carries no valid
// credentials.
func (a *authenticator) identify(r *http.Request) (user, bool) {
	if a.Open() {
		return user{Name: LocalUser, Operator: true}, true
	}
	name := ""
	if a.TrustedUserHeader != "" {
		name = strings.TrimSpace(r.Header.Get(a.TrustedUserHeader))
	}
	if name == "" && len(a.Users) > 0 {
		if u, p, ok := r.BasicAuth(); ok && a.check(u, p) {
			name = u
		}
	}
	if name == "" {
		return user{}, false
	}
	return user{Name: name, Operator: slices.Contains(a.Operators, name)}, true
}

// check compares a Basic auth pair with the htpasswd entry.
func (a *authenticator) check(name, password string) bool {
	hash, ok := a.Users[name]
	if !ok {
		// Spend the same time as a wrong password, so that a probe cannot
		// tell which names exist.
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
		return false
	}
	key := sha256.Sum256([]byte(name + "\x00" + password + "\x00" + string(hash)))
	a.mu.Lock()
	_, seen := a.verified[key]
	a.mu.Unlock()
	if seen {
		return true
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil {
		return false
	}
	a.mu.Lock()
	if len(a.verified) > 1024 { // a bound, not a cache policy: a few operators use it
		clear(a.verified)
	}
	a.verified[key] = name
	a.mu.Unlock()
	return true
}

// dummyHash is a bcrypt hash of nothing anyone types, for unknown users.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("engagement-console unknown user"), bcrypt.DefaultCost)

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
