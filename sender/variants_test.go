package sender_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/sender"
)

// catalogFile writes a catalog file for LoadCatalog.
func catalogFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// VariantsCatalog is a catalog file with two goodbye variants, the
// embedded text and a short one, in both of the embedded locales.
const VariantsCatalog = `{
  "$variants": {"goodbye": {"b": "engagement.goodbye.short", "a": "engagement.goodbye.self_select"}},
  "engagement.goodbye.short": {"pt-BR": "Oi! Sentimos sua falta. 1, 2 ou 3?", "en": "Hi! We miss you. 1, 2 or 3?"}
}`

// Issue 45: a catalog's "$variants" give a kind several texts, sorted by
// name; a variant naming a key the catalog lacks, a variant that does not
// cover every locale, a kind that takes none, a single variant, a bad name
// and a malformed entry are each refused, saying which.
func TestCatalogVariants(t *testing.T) {
	t.Parallel()
	c, err := sender.LoadCatalog(catalogFile(t, VariantsCatalog))
	if err != nil {
		t.Fatal(err)
	}
	want := []sender.Variant{{Name: "a", Key: "engagement.goodbye.self_select"}, {Name: "b", Key: "engagement.goodbye.short"}}
	if got := c.Variants("goodbye"); !slices.Equal(got, want) {
		t.Errorf("Variants(goodbye) = %v, want %v", got, want)
	}
	if got := c.VariantKeys(); !slices.Equal(got, []string{"engagement.goodbye.self_select", "engagement.goodbye.short"}) {
		t.Errorf("VariantKeys() = %v", got)
	}
	if got := sender.DefaultCatalog().Variants("goodbye"); len(got) != 0 {
		t.Errorf("the embedded catalog has goodbye variants %v, want none", got)
	}

	for name, c := range map[string]struct{ body, want string }{
		"missing key": {`{"$variants": {"goodbye": {"a": "engagement.goodbye.self_select", "b": "engagement.goodbye.nope"}}}`,
			`variant "b" names message key "engagement.goodbye.nope", which the catalog does not have`},
		"a locale short": {`{"$variants": {"goodbye": {"a": "engagement.goodbye.self_select", "b": "k"}}, "k": {"pt-BR": "x"}}`,
			`variant "b" (key "k") has no en template, which "engagement.goodbye.self_select" has: every variant must cover every locale`},
		"a locale only one has": {`{"$variants": {"goodbye": {"a": "engagement.goodbye.self_select", "b": "k"}}, "k": {"pt-BR": "x", "en": "y", "es": "z"}}`,
			`variant "a" (key "engagement.goodbye.self_select") has no es template, which "k" has`},
		"a kind without variants": {`{"$variants": {"weekly_review": {"a": "engagement.weekly_review.celebration", "b": "engagement.goodbye.self_select"}}}`,
			`kind "weekly_review" takes no variants`},
		"an unknown kind": {`{"$variants": {"hello": {"a": "x", "b": "y"}}}`, `unknown message kind "hello"`},
		"one variant":     {`{"$variants": {"goodbye": {"a": "engagement.goodbye.self_select"}}}`, `has 1 variant, want at least two`},
		"a bad name":      {`{"$variants": {"goodbye": {"A b": "engagement.goodbye.self_select", "b": "engagement.goodbye.self_select"}}}`, `variant name "A b"`},
		"not an object":   {`{"$variants": ["a", "b"]}`, `"$variants" must be an object`},
		"another $ entry": {`{"$variant": {}}`, `unknown entry "$variant"`},
	} {
		_, err := sender.LoadCatalog(catalogFile(t, c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}
