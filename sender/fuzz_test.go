package sender

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
)

// FuzzNormalizeKey: a normalized key has no surrounding space, is never
// longer than MaxKeyLength, holds no control character, passes
// ValidateKey (the rule delivery applies), and normalizing it again
// changes nothing. A key is refused only for breaking that rule.
func FuzzNormalizeKey(f *testing.F) {
	for _, seed := range []string{"", "  ", "u1:goodbye_sent:2026-11-23", " k ", strings.Repeat("a", 128), strings.Repeat("é", 129), "\u00a0k\u2003",
		"k\r\nX: 1", "a\tb", "a\ab", "\tk\n", "a\x00b", "a\u0085b", "a\xffb"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		got, err := NormalizeKey(key)
		trimmed := strings.TrimSpace(key)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("NormalizeKey(%q) = %v, not an ErrInvalidKey", key, err)
			}
			if utf8.ValidString(trimmed) && utf8.RuneCountInString(trimmed) <= MaxKeyLength && !strings.ContainsFunc(trimmed, unicode.IsControl) {
				t.Fatalf("NormalizeKey(%q) = %v for a key within the rule", key, err)
			}
			return
		}
		if utf8.RuneCountInString(got) > MaxKeyLength {
			t.Fatalf("NormalizeKey(%q) = %q, longer than %d", key, got, MaxKeyLength)
		}
		if strings.ContainsFunc(got, unicode.IsControl) || !utf8.ValidString(got) {
			t.Fatalf("NormalizeKey(%q) = %q holds a control character or is not UTF-8", key, got)
		}
		if got != "" {
			first, _ := utf8.DecodeRuneInString(got)
			last, _ := utf8.DecodeLastRuneInString(got)
			if unicode.IsSpace(first) || unicode.IsSpace(last) {
				t.Fatalf("NormalizeKey(%q) = %q keeps surrounding space", key, got)
			}
			if err := ValidateKey(got); err != nil {
				t.Fatalf("NormalizeKey(%q) = %q, which ValidateKey refuses: %v", key, got, err)
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
		text, err := c.Render(fixture.WeeklyReview.CatalogKey, locale, map[string]string{"count": value, "extra": value})
		if err != nil {
			t.Fatalf("Render(weekly review, %q, count=%q): %v", locale, value, err)
		}
		if !strings.Contains(text, value) {
			t.Fatalf("Render(weekly review, %q, count=%q) = %q: the value is missing", locale, value, text)
		}
		if _, err := c.Render(fixture.Goodbye.CatalogKey, locale, map[string]string{"count": value}); err != nil {
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
	f.Add([]byte(`{"$variants":{"goodbye":{"a":"engagement.goodbye.self_select","b":"k"}},"k":{"pt-BR":"x","en":"y"}}`))
	f.Add(embeddedCatalog)
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, variants, problems, err := parseCatalogJSON(data)
		if err != nil {
			return
		}
		c, err := compileCatalog("fuzz", raw, variants, problems)
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
