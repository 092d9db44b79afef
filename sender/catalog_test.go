package sender_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/sender"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// writeCatalog writes content to a catalog file in a fresh directory and
// returns its path.
func writeCatalog(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadCatalog(t *testing.T, content string) *sender.Catalog {
	t.Helper()
	c, err := sender.LoadCatalog(writeCatalog(t, content))
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	return c
}

func mustRender(t *testing.T, c *sender.Catalog, key, locale string, params map[string]string) string {
	t.Helper()
	got, err := c.Render(key, locale, params)
	if err != nil {
		t.Fatalf("Render(%q, %q, %v): %v", key, locale, params, err)
	}
	return got
}

// Every message kind of the state machine's table has its text in the
// shipped catalog, in every locale the catalog speaks, and every text there
// belongs to a kind: declaring a kind without its texts fails here, not at
// 3 a.m. when its first message fails to render.
func TestEveryKindHasItsCatalogEntries(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	var texts map[string]map[string]string
	if err := json.Unmarshal(b, &texts); err != nil {
		t.Fatal(err)
	}
	locales := map[string]bool{}
	for _, byLocale := range texts {
		for loc := range byLocale {
			locales[loc] = true
		}
	}
	kinds := map[string]sm.Message{}
	for _, k := range sm.Kinds() {
		kinds[k.CatalogKey] = k.Message
		for loc := range locales {
			if strings.TrimSpace(texts[k.CatalogKey][loc]) == "" {
				t.Errorf("kind %s: catalog.json has no %s text for %s", k.Message, loc, k.CatalogKey)
			}
		}
	}
	for key := range texts {
		if _, ok := kinds[key]; !ok {
			t.Errorf("catalog.json has %s, which no kind of statemachine.Kinds uses", key)
		}
	}
}

func TestCatalogKeys(t *testing.T) {
	t.Parallel()
	got := sender.DefaultCatalog().Keys()
	var want []string
	for _, k := range sm.Kinds() {
		want = append(want, k.CatalogKey)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Keys() = %q, want %q", got, want)
	}
	if got := (*sender.Catalog)(nil).Keys(); len(got) != 0 {
		t.Errorf("nil catalog Keys() = %q, want none", got)
	}
}

func TestCatalogRender(t *testing.T) {
	t.Parallel()
	c := sender.DefaultCatalog()
	count := map[string]string{"count": "12"}
	tests := []struct {
		name, key, locale string
		params            map[string]string
		want              []string // substrings of the text
	}{
		{"goodbye pt-BR", fixture.Goodbye.CatalogKey, "pt-BR", nil, []string{"Oi!", "1️⃣ Preciso de ajuda", "2️⃣ Me lembre mais tarde", "3️⃣ Agora não, obrigado"}},
		{"goodbye en", fixture.Goodbye.CatalogKey, "en", nil, []string{"Hi!", "1️⃣ I need help", "2️⃣ Remind me later", "3️⃣ Not now"}},
		{"goodbye ignores extra params", fixture.Goodbye.CatalogKey, "pt-BR", map[string]string{"count": "3", "name": "Ana"}, []string{"1️⃣", "2️⃣", "3️⃣"}},
		{"weekly review pt-BR", fixture.WeeklyReview.CatalogKey, "pt-BR", count, []string{"🎉", "Transações registradas: 12", "últimos 7 dias"}},
		{"weekly review en", fixture.WeeklyReview.CatalogKey, "en", count, []string{"🎉", "Transactions logged: 12", "last 7 days"}},
		{"weekly review with zero transactions", fixture.WeeklyReview.CatalogKey, "pt-BR", map[string]string{"count": "0"}, []string{"Transações registradas: 0"}},
	}
	for _, tt := range tests {
		got, err := c.Render(tt.key, tt.locale, tt.params)
		if err != nil {
			t.Errorf("%s: Render error: %v", tt.name, err)
			continue
		}
		for _, want := range tt.want {
			if !strings.Contains(got, want) {
				t.Errorf("%s: got %q, want it to contain %q", tt.name, got, want)
			}
		}
		if strings.ContainsAny(got, "{}") {
			t.Errorf("%s: got %q, want no braces left", tt.name, got)
		}
	}
	for _, key := range c.Keys() {
		pt := mustRender(t, c, key, "pt-BR", count)
		en := mustRender(t, c, key, "en", count)
		if pt == en {
			t.Errorf("%s: pt-BR and en render the same text %q, want a translation", key, pt)
		}
	}
}

func TestCatalogLocaleFallback(t *testing.T) {
	t.Parallel()
	c := sender.DefaultCatalog()
	params := map[string]string{"count": "5"}
	tests := []struct{ locale, wantLocale string }{
		{"pt-BR", "pt-BR"},
		{"pt-br", "pt-BR"},
		{"PT_br", "pt-BR"},
		{"pt", "pt-BR"},
		{"pt-PT", "pt-BR"},
		{"en", "en"},
		{"EN", "en"},
		{"en-US", "en"},
		{"en_GB", "en"},
		{" en-us ", "en"},
		{"fr", "pt-BR"},
		{"fr-CA", "pt-BR"},
		{"", "pt-BR"},
		{"-", "pt-BR"},
		{"zz-\xff", "pt-BR"},
	}
	for _, key := range c.Keys() {
		for _, tt := range tests {
			got := mustRender(t, c, key, tt.locale, params)
			if want := mustRender(t, c, key, tt.wantLocale, params); got != want {
				t.Errorf("%s in %q: got %q, want the %s text %q", key, tt.locale, got, tt.wantLocale, want)
			}
		}
	}
}

func TestCatalogLanguageFallbackPrefersBareThenDefault(t *testing.T) {
	t.Parallel()
	c := loadCatalog(t, `{
		"a": {"pt-BR": "a pt-BR", "pt-PT": "a pt-PT", "pt": "a pt", "en-GB": "a en-GB", "en-AU": "a en-AU"},
		"b": {"pt-BR": "b pt-BR", "pt-AO": "b pt-AO"}
	}`)
	tests := []struct{ key, locale, want string }{
		{"a", "pt-MZ", "a pt"},
		{"a", "pt-pt", "a pt-PT"},
		{"a", "en", "a en-AU"}, // first in sorted order
		{"a", "en-US", "a en-AU"},
		{"a", "en-GB", "a en-GB"},
		{"b", "pt", "b pt-BR"},
		{"b", "pt-MZ", "b pt-BR"},
		{"b", "pt-AO", "b pt-AO"},
		{"b", "en", "b pt-BR"},
	}
	for _, tt := range tests {
		if got := mustRender(t, c, tt.key, tt.locale, nil); got != tt.want {
			t.Errorf("%s in %q: got %q, want %q", tt.key, tt.locale, got, tt.want)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		catalog       *sender.Catalog
		key           string
		params        map[string]string
		wantUnknown   bool
		wantInMessage []string
	}{
		{"unknown key", sender.DefaultCatalog(), "engagement.nope", nil, true, []string{`"engagement.nope"`, "unknown message key"}},
		{"empty key", sender.DefaultCatalog(), "", nil, true, []string{`""`}},
		{"nil catalog", nil, fixture.Goodbye.CatalogKey, nil, true, []string{fixture.Goodbye.CatalogKey}},
		{"zero catalog", &sender.Catalog{}, fixture.Goodbye.CatalogKey, nil, true, []string{fixture.Goodbye.CatalogKey}},
		{"missing param", sender.DefaultCatalog(), fixture.WeeklyReview.CatalogKey, nil, false, []string{`missing param "count" for message key "` + fixture.WeeklyReview.CatalogKey + `"`}},
		{"missing param, others given", sender.DefaultCatalog(), fixture.WeeklyReview.CatalogKey, map[string]string{"Count": "1", "n": "2"}, false, []string{`missing param "count"`}},
	}
	for _, tt := range tests {
		got, err := tt.catalog.Render(tt.key, "pt-BR", tt.params)
		if err == nil {
			t.Errorf("%s: got %q, want an error", tt.name, got)
			continue
		}
		if errors.Is(err, sender.ErrUnknownKey) != tt.wantUnknown {
			t.Errorf("%s: errors.Is(%v, ErrUnknownKey) = %v, want %v", tt.name, err, !tt.wantUnknown, tt.wantUnknown)
		}
		for _, want := range tt.wantInMessage {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: got error %q, want it to contain %q", tt.name, err, want)
			}
		}
	}
}

func TestRenderSyntax(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, template string
		params         map[string]string
		want           string
	}{
		{"no placeholders", "plain text", nil, "plain text"},
		{"one param", "Oi, {name}!", map[string]string{"name": "Ana"}, "Oi, Ana!"},
		{"param twice, adjacent params", "{a}{b}{a}", map[string]string{"a": "1", "b": "2"}, "121"},
		{"names: letters, digits, underscore", "{user_name2}", map[string]string{"user_name2": "x"}, "x"},
		{"empty value", "[{count}]", map[string]string{"count": ""}, "[]"},
		{"escaped braces", "{{literal}} and }}", nil, "{literal} and }"},
		{"escape around a param", "{{{count}}}", map[string]string{"count": "3"}, "{3}"},
		{"values are not expanded", "{a}", map[string]string{"a": "{b}", "b": "no"}, "{b}"},
		{"multibyte text", "🎉 {n} ✅", map[string]string{"n": "ção"}, "🎉 ção ✅"},
	}
	for _, tt := range tests {
		doc, err := json.Marshal(map[string]map[string]string{"k": {"pt-BR": tt.template}})
		if err != nil {
			t.Fatal(err)
		}
		c := loadCatalog(t, string(doc))
		if got := mustRender(t, c, "k", "pt-BR", tt.params); got != tt.want {
			t.Errorf("%s: %q renders %q, want %q", tt.name, tt.template, got, tt.want)
		}
	}
}

func TestLoadCatalogOverride(t *testing.T) {
	t.Parallel()
	def := sender.DefaultCatalog()
	params := map[string]string{"count": "4"}
	c := loadCatalog(t, `{
		"engagement.goodbye.self_select": {"EN": "Bye {{for now}}: 1, 2 or 3?"},
		"custom.key": {"pt-BR": "Oi {name}", "en-GB": "Hello {name}"}
	}`)

	want := append(def.Keys(), "custom.key")
	slices.Sort(want)
	if got := c.Keys(); !slices.Equal(got, want) {
		t.Errorf("Keys() = %q, want %q", got, want)
	}
	tests := []struct {
		name, key, locale, want string
	}{
		{"overridden locale", fixture.Goodbye.CatalogKey, "en", "Bye {for now}: 1, 2 or 3?"},
		{"overridden locale, by region", fixture.Goodbye.CatalogKey, "en-US", "Bye {for now}: 1, 2 or 3?"},
		{"other locale of the key kept", fixture.Goodbye.CatalogKey, "pt-BR", mustRender(t, def, fixture.Goodbye.CatalogKey, "pt-BR", nil)},
		{"other key kept (pt-BR)", fixture.WeeklyReview.CatalogKey, "pt-BR", mustRender(t, def, fixture.WeeklyReview.CatalogKey, "pt-BR", params)},
		{"other key kept (en)", fixture.WeeklyReview.CatalogKey, "en", mustRender(t, def, fixture.WeeklyReview.CatalogKey, "en", params)},
		{"new key", "custom.key", "pt-BR", "Oi Ana"},
		{"new key, language fallback", "custom.key", "en", "Hello Ana"},
	}
	for _, tt := range tests {
		p := map[string]string{"count": "4", "name": "Ana"}
		if got := mustRender(t, c, tt.key, tt.locale, p); got != tt.want {
			t.Errorf("%s: %s in %q: got %q, want %q", tt.name, tt.key, tt.locale, got, tt.want)
		}
	}

	// The default catalog is not changed by loading a file.
	if got, want := mustRender(t, def, fixture.Goodbye.CatalogKey, "en", nil), "Bye {for now}: 1, 2 or 3?"; got == want {
		t.Errorf("DefaultCatalog goodbye in en = %q after LoadCatalog, want the embedded text", got)
	}
	if got := def.Keys(); slices.Contains(got, "custom.key") {
		t.Errorf("DefaultCatalog Keys() = %q after LoadCatalog, want the embedded keys only", got)
	}

	// An empty object overrides nothing.
	empty := loadCatalog(t, `{}`)
	for _, key := range def.Keys() {
		for _, locale := range []string{"pt-BR", "en"} {
			if got, want := mustRender(t, empty, key, locale, params), mustRender(t, def, key, locale, params); got != want {
				t.Errorf("empty file: %s in %s: got %q, want %q", key, locale, got, want)
			}
		}
	}
}

func TestLoadCatalogErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, content string
		want          []string // substrings of the error
	}{
		{"invalid JSON", `{"k": {"pt-BR": "x"`, []string{"invalid JSON"}},
		{"empty file", ``, []string{"invalid JSON"}},
		{"wrong shape", `{"k": "just a string"}`, []string{"invalid JSON"}},
		{"unclosed placeholder", `{"k": {"pt-BR": "ok", "en": "Hi {name"}}`, []string{`key "k", locale "en"`, `unclosed "{" at byte 3`}},
		{"unclosed at the end", `{"k": {"pt-BR": "Hi {"}}`, []string{`unclosed "{"`}},
		{"empty placeholder", `{"k": {"pt-BR": "Hi {}"}}`, []string{`empty placeholder`}},
		{"invalid name", `{"k": {"pt-BR": "Hi {first name}"}}`, []string{`invalid character ' ' in placeholder`}},
		{"lone closing brace", `{"k": {"pt-BR": "Hi :}"}}`, []string{`unmatched "}" at byte 4`}},
		{"override of an embedded key", `{"` + fixture.WeeklyReview.CatalogKey + `": {"en": "{count"}}`, []string{fixture.WeeklyReview.CatalogKey, `unclosed "{"`}},
		{"new key without pt-BR", `{"k": {"en": "Hi"}}`, []string{`key "k": no pt-BR template`}},
		{"empty template", `{"k": {"pt-BR": "  "}}`, []string{`empty template`}},
		{"invalid locale", `{"k": {"pt-BR": "x", "pt BR": "y"}}`, []string{`invalid locale "pt BR"`}},
		{"locale twice", `{"k": {"pt-BR": "x", "pt-br": "y"}}`, []string{`given twice`}},
		{"empty key", `{"": {"pt-BR": "x"}}`, []string{`empty message key`}},
		{"every problem reported", `{"a": {"pt-BR": "{"}, "b": {"pt-BR": "}"}}`, []string{`key "a"`, `key "b"`}},
	}
	for _, tt := range tests {
		path := writeCatalog(t, tt.content)
		c, err := sender.LoadCatalog(path)
		if err == nil {
			t.Errorf("%s: LoadCatalog(%s) = %v, want an error", tt.name, tt.content, c.Keys())
			continue
		}
		for _, want := range append([]string{path}, tt.want...) {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: got error %q, want it to contain %q", tt.name, err, want)
			}
		}
	}

	missing := filepath.Join(t.TempDir(), "missing.json")
	_, err := sender.LoadCatalog(missing)
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: got error %v, want one naming %s and wrapping fs.ErrNotExist", err, missing)
	}
}

// FuzzRender renders arbitrary locales and params with the embedded catalog,
// and arbitrary templates loaded from a file. Rendering must never panic, and
// a placeholder whose param is given must never be left in the text.
func FuzzRender(f *testing.F) {
	seeds := []struct{ template, locale, name, value string }{
		{"Oi {name}!", "pt-BR", "name", "Ana"},
		{"{{literal}} {count}", "en-US", "count", "0"},
		{"{{{count}}}", "EN", "count", "7"},
		{"{", "", "x", "{x}"},
		{"}", "pt", "", ""},
		{"{a b}", "fr", "a", "}}"},
		{"{count}{count}", "pt_br", "count", "{count}"},
		{"\xff{x}\x00", "zz-\xff", "x", "\x00"},
		{"🎉 {count} transações", "pt-BR", "count", "1"},
	}
	for _, s := range seeds {
		f.Add(s.template, s.locale, s.name, s.value)
	}
	def := sender.DefaultCatalog()
	f.Fuzz(func(t *testing.T, template, locale, name, value string) {
		params := map[string]string{name: value}
		if name != "count" {
			params["count"] = "3"
		}
		braceFreeValues := !strings.ContainsAny(value, "{}")
		check := func(what, got string) {
			if !braceFreeValues {
				return
			}
			for n := range params {
				if strings.Contains(got, "{"+n+"}") {
					t.Errorf("%s: got %q, want no unreplaced {%s} (params %q)", what, got, n, params)
				}
			}
		}

		for _, key := range def.Keys() {
			got, err := def.Render(key, locale, params)
			if err != nil {
				t.Errorf("embedded %s in %q: %v", key, locale, err)
				continue
			}
			check("embedded "+key, got)
		}

		doc, err := json.Marshal(map[string]map[string]string{"fuzz": {"pt-BR": template}})
		if err != nil {
			t.Fatal(err)
		}
		path := writeCatalog(t, string(doc))
		c, err := sender.LoadCatalog(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("LoadCatalog error %q does not name the file", err)
			}
			return
		}
		got, err := c.Render("fuzz", locale, params)
		if err != nil {
			if !strings.Contains(err.Error(), "missing param") {
				t.Errorf("Render(%q): unexpected error %v", template, err)
			}
			return
		}
		if !strings.Contains(template, "{{") {
			check("template "+template, got)
		}
		if utf8.ValidString(template) && !strings.ContainsAny(template, "{}") && got != template {
			t.Errorf("brace-free template %q renders %q, want it unchanged", template, got)
		}
	})
}
