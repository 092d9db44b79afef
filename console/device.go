package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"time"
)

// Device cookies, after OWASP's "Slow Down Online Guessing Attacks with
// Device Cookies"
// (https://owasp.org/www-community/Slow_Down_Online_Guessing_Attacks_with_Device_Cookies;
// the Authentication Cheat Sheet's "Account Lockout",
// https://cheatsheetseries.owasp.org/cheatsheets/Authentication_Cheat_Sheet.html#account-lockout,
// points to it). A limit per user name alone lets anyone lock a user out
// by guessing from many addresses (issue 56: the operator's right
// password got 429 for a minute). So a browser that signs in as a user
// gets a cookie naming that device; a later login presenting it is
// limited by that device's failures only, not by the name's limit nor its
// address's, which the untrusted clients share. The device's own
// failures still lock the device.
//
// The cookie holds a random device id, the time it was issued and an
// HMAC-SHA256 over them and the user's name, keyed with the user's
// htpasswd hash and --csrf-key (when given): no secret, no name, nothing
// personal. It is bound to the name (another user's cookie is no use),
// it survives a restart and every replica that reads the same htpasswd
// file (and --csrf-key), and a new password forgets every device. It
// grants nothing but the allowance: the password is checked as always.

// deviceCookieName is the device cookie's name.
const deviceCookieName = "engagement_console_device"

const (
	// deviceTrust is how long a device cookie is good for after it was
	// issued; a sign-in deviceRenewTime or more after that issues it
	// again (the same device, a new time).
	deviceTrust     = 180 * 24 * time.Hour
	deviceRenewTime = 24 * time.Hour

	deviceIDLen   = 16
	devicePayload = deviceIDLen + 8 // the id, then the issue time in Unix seconds
	deviceMACLen  = 32
)

// device is a device cookie read from a request.
type device struct {
	id     [deviceIDLen]byte
	issued time.Time
}

// deviceMAC is the cookie's HMAC for user name with htpasswd hash.
func (a *authenticator) deviceMAC(payload []byte, name string, hash []byte) []byte {
	key := make([]byte, 0, len(a.deviceSecret)+1+len(hash))
	key = append(append(append(key, a.deviceSecret...), 0), hash...)
	m := hmac.New(sha256.New, key)
	m.Write([]byte("engagement-console device\x00" + name + "\x00"))
	m.Write(payload)
	return m.Sum(nil)
}

// trustedDevice reads r's device cookie for user name, whose htpasswd
// hash is hash (the unknown users' hash for an unknown name, so that the
// time it takes says nothing), and reports whether it is one this console
// issued to name that is still trusted at now.
func (a *authenticator) trustedDevice(r *http.Request, name string, hash []byte, now time.Time) (device, bool) {
	c, err := r.Cookie(deviceCookieName)
	if err != nil {
		return device{}, false
	}
	b64, mac64, ok := strings.Cut(c.Value, ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(b64)
	mac, err2 := base64.RawURLEncoding.DecodeString(mac64)
	if !ok || err1 != nil || err2 != nil || len(payload) != devicePayload || len(mac) != deviceMACLen {
		return device{}, false
	}
	if !hmac.Equal(mac, a.deviceMAC(payload, name, hash)) {
		return device{}, false
	}
	var d device
	copy(d.id[:], payload)
	d.issued = time.Unix(int64(binary.BigEndian.Uint64(payload[deviceIDLen:])), 0)
	if now.Sub(d.issued) > deviceTrust || d.issued.Sub(now) > deviceRenewTime {
		return device{}, false
	}
	return d, true
}

// deviceCookie is the cookie to set on a response to name's sign-in from
// r: a new device's, the same device's renewed when it was issued a day or
// more ago, or nil when the request's is fresh.
func (a *authenticator) deviceCookie(r *http.Request, d device, trusted bool, name string, now time.Time) *http.Cookie {
	if trusted && now.Sub(d.issued) < deviceRenewTime {
		return nil
	}
	if !trusted {
		if _, err := rand.Read(d.id[:]); err != nil {
			return nil // no new device this time; the next sign-in tries again
		}
	}
	payload := make([]byte, devicePayload)
	copy(payload, d.id[:])
	binary.BigEndian.PutUint64(payload[deviceIDLen:], uint64(now.Unix()))
	value := base64.RawURLEncoding.EncodeToString(payload) + "." +
		base64.RawURLEncoding.EncodeToString(a.deviceMAC(payload, name, a.Users[name]))
	// Secure when the request came over HTTPS: a console served over
	// plain HTTP would never be sent a Secure cookie back.
	return &http.Cookie{Name: deviceCookieName, Value: value, Path: "/", MaxAge: int(deviceTrust / time.Second), //nolint:gosec // Secure as above
		HttpOnly: true, Secure: a.https(r), SameSite: http.SameSiteLaxMode}
}

// https reports whether r reached the console over HTTPS: its own TLS, or
// a trusted proxy's that says so (X-Forwarded-Proto).
func (a *authenticator) https(r *http.Request) bool {
	return r.TLS != nil || a.trusted(peerAddr(r)) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// deviceKey is the key of a device's limit: the user's name and the
// device's id (a cookie is bound to its user).
func deviceKey(name string, d device) string {
	return limitName(name) + "\x00" + string(d.id[:])
}
