package cli

import (
	"testing"
	"time"
)

// FuzzParseAsOf: --as-of never panics; an accepted instant is in UTC and
// survives formatting and parsing again unchanged.
func FuzzParseAsOf(f *testing.F) {
	for _, seed := range []string{"2026-11-22T06:00:00Z", "2026-11-22T23:59:59.999999999-03:00", "2026-12-31T24:00:00Z", "yesterday", "", " 2027-01-01T00:00:00+14:00 "} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseAsOf(s)
		if err != nil {
			return
		}
		if got.Location() != time.UTC {
			t.Fatalf("parseAsOf(%q) = %v, not in UTC", s, got)
		}
		again, err := parseAsOf(got.Format(time.RFC3339Nano))
		if err != nil || !again.Equal(got) {
			t.Fatalf("parseAsOf(%q) = %v, which does not parse back: %v, %v", s, got, again, err)
		}
	})
}
