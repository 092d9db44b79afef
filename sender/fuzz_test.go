package sender

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzNormalizeKey: a normalized key has no surrounding space, is never
// longer than MaxKeyLength, and normalizing it again changes nothing.
func FuzzNormalizeKey(f *testing.F) {
	for _, seed := range []string{"", "  ", "u1:goodbye_sent:2026-11-23", " k ", strings.Repeat("a", 128), strings.Repeat("é", 129), "\u00a0k\u2003"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		got, err := NormalizeKey(key)
		if err != nil {
			if utf8.RuneCountInString(strings.TrimSpace(key)) <= MaxKeyLength {
				t.Fatalf("NormalizeKey(%q) = %v for a key within the limit", key, err)
			}
			return
		}
		if utf8.RuneCountInString(got) > MaxKeyLength {
			t.Fatalf("NormalizeKey(%q) = %q, longer than %d", key, got, MaxKeyLength)
		}
		if got != "" {
			first, _ := utf8.DecodeRuneInString(got)
			last, _ := utf8.DecodeLastRuneInString(got)
			if unicode.IsSpace(first) || unicode.IsSpace(last) {
				t.Fatalf("NormalizeKey(%q) = %q keeps surrounding space", key, got)
			}
		}
		if again, err := NormalizeKey(got); err != nil || again != got {
			t.Fatalf("NormalizeKey is not idempotent: %q -> %q -> %q, %v", key, got, again, err)
		}
	})
}

// FuzzRenderParams: any param value and locale render the built-in
// templates without error, and the value appears in the text verbatim
// (never expanded as a template itself).
func FuzzRenderParams(f *testing.F) {
	for _, seed := range [][2]string{{"3", "pt-BR"}, {"{count}", "en"}, {"{{", "EN-us"}, {"}", ""}, {"\x00\xff", "pt_br"}, {"", "zz"}} {
		f.Add(seed[0], seed[1])
	}
	c := DefaultCatalog()
	f.Fuzz(func(t *testing.T, value, locale string) {
		text, err := c.Render(KeyWeeklyReview, locale, map[string]string{"count": value, "extra": value})
		if err != nil {
			t.Fatalf("Render(weekly review, %q, count=%q): %v", locale, value, err)
		}
		if !strings.Contains(text, value) {
			t.Fatalf("Render(weekly review, %q, count=%q) = %q: the value is missing", locale, value, text)
		}
		if _, err := c.Render(KeyGoodbye, locale, map[string]string{"count": value}); err != nil {
			t.Fatalf("Render(goodbye, %q): %v", locale, err)
		}
	})
}

// FuzzCatalogFile: no catalog file, however malformed, makes loading panic;
// one that loads renders every key in the default locale when each param
// it names is given.
func FuzzCatalogFile(f *testing.F) {
	f.Add([]byte(`{"k":{"pt-BR":"a {x} b {{ }}","en":"c"}}`))
	f.Add([]byte(`{"k":{"pt-BR":"{"}}`))
	f.Add([]byte(`{"k":{"en":"no default"}}`))
	f.Add([]byte(`{"k":{"pt-BR":""}}`))
	f.Add([]byte(`[]`))
	f.Add(embeddedCatalog)
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, problems, err := parseCatalogJSON(data)
		if err != nil {
			return
		}
		c, err := compileCatalog("fuzz", raw, problems)
		if err != nil {
			return
		}
		for _, key := range c.Keys() {
			params := map[string]string{}
			for _, seg := range c.messages[key].fallback {
				if seg.param {
					params[seg.text] = "v"
				}
			}
			if _, err := c.Render(key, DefaultLocale, params); err != nil {
				t.Fatalf("a loaded catalog fails to render %q with all its params: %v", key, err)
			}
		}
	})
}
