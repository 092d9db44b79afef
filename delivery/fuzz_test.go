package delivery

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzDecodeParams: any message_params either decodes to strings or fails
// with one line that names no value, so a bad row fails alone and its
// content stays out of error_message.
func FuzzDecodeParams(f *testing.F) {
	for _, seed := range []string{`{"count":"3"}`, `{"count":3}`, `[1]`, `"x"`, `true`, `null`, `{"a":{"b":1}}`, `{"a":null}`, `{`, `{"a":1e400}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		params, err := decodeParams(&raw)
		if err != nil {
			if params != nil || strings.ContainsAny(err.Error(), "\n\r") || !strings.HasPrefix(err.Error(), "message_params") {
				t.Fatalf("decodeParams(%q) = %v, %q: want no params and one line about message_params", raw, params, err)
			}
			return
		}
		for name, v := range params {
			if !utf8.ValidString(name) || !utf8.ValidString(v) { // JSON text decodes to valid UTF-8
				t.Fatalf("decodeParams(%q): %q = %q", raw, name, v)
			}
		}
	})
}

// FuzzParseQuietHours: what parses formats back to itself, within a day.
func FuzzParseQuietHours(f *testing.F) {
	for _, seed := range []string{"21:00-08:00", "00:00-23:59", "08:00-08:00", "24:00-01:00", "7:00-8:00", "", "-", "21:00-08:00-09:00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuietHours(s)
		if err != nil {
			return
		}
		if q.Start == q.End || q.Start < 0 || q.End < 0 || q.Start >= 24*time.Hour || q.End >= 24*time.Hour {
			t.Fatalf("ParseQuietHours(%q) = %+v", s, q)
		}
		again, err := ParseQuietHours(q.String())
		if err != nil || again != q {
			t.Fatalf("ParseQuietHours(%q) = %s, which parses to %+v, %v", s, q, again, err)
		}
	})
}
