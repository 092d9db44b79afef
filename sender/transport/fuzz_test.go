package transport

import (
	"testing"
)

// FuzzWebhookSignature: a body verifies under the secret that signed it,
// and under no other secret or after any change to the body; no header
// makes verification panic.
func FuzzWebhookSignature(f *testing.F) {
	f.Add("s3cret", []byte(`{"id":"1"}`), "sha256=00")
	f.Add("", []byte(""), "")
	f.Add("k", []byte("\x00"), "SHA256=zz")
	f.Fuzz(func(t *testing.T, secret string, body []byte, header string) {
		_ = VerifySignature(secret, body, header) // arbitrary headers: no panic
		sig := Sign(secret, body)
		if got := VerifySignature(secret, body, sig); got != (secret != "") {
			t.Fatalf("VerifySignature(own signature) = %v, want %v (secret %q)", got, secret != "", secret)
		}
		if secret == "" {
			return
		}
		if VerifySignature(secret+"x", body, sig) {
			t.Fatal("a signature verified under another secret")
		}
		changed := append([]byte{}, body...)
		if len(changed) == 0 {
			changed = []byte{0}
		} else {
			changed[len(changed)/2] ^= 0x01
		}
		if VerifySignature(secret, changed, sig) {
			t.Fatal("a signature verified for a changed body")
		}
	})
}
