package cli

import (
	"testing"
	"time"
)

// FuzzParseAsOf: --as-of never panics; an accepted instant is in UTC, not
// before 2000-01-01, and survives formatting and parsing again unchanged.
func FuzzParseAsOf(f *testing.F) {
	for _, seed := range []string{"2026-11-22T06:00:00Z", "2026-11-22T23:59:59.999999999-03:00", "2026-12-31T24:00:00Z", "yesterday", "", "0001-01-01T00:00:00Z", " 2027-01-01T00:00:00+14:00 "} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseAsOf("--as-of", s)
		if err != nil {
			return
		}
		if got.Location() != time.UTC {
			t.Fatalf("parseAsOf(%q) = %v, not in UTC", s, got)
		}
		if got.Before(minAsOf) {
			t.Fatalf("parseAsOf(%q) = %v, before %v", s, got, minAsOf)
		}
		again, err := parseAsOf("--as-of", got.Format(time.RFC3339Nano))
		if err != nil || !again.Equal(got) {
			t.Fatalf("parseAsOf(%q) = %v, which does not parse back: %v, %v", s, got, again, err)
		}
	})
}
