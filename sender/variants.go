package sender

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// VariantsKey is the catalog file's reserved top-level entry that lists each
// message kind's copy variants (issue 45):
//
//	"$variants": {"goodbye": {"a": "engagement.goodbye.self_select", "b": "engagement.goodbye.short"}}
//
// A kind with variants sends each user one of them, the same one every
// time (engagement-daily picks it by a hash of the user id), and records
// the variant's name on the message; on the Cloud API each variant's key
// is its own approved template. Only the goodbye takes variants for now.
const VariantsKey = "$variants"

// Variant is one text of a message kind: its name (recorded on the message
// and reported by the funnel) and the catalog key it renders.
type Variant struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// variantKinds are the message kinds that take variants: the ones whose
// job picks one.
var variantKinds = []sm.Message{sm.GoodbyeMessage}

var variantName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Variants lists kind's variants, sorted by name; none when the kind has
// a single text (its CatalogKey).
func (c *Catalog) Variants(kind string) []Variant {
	if c == nil {
		return nil
	}
	return slices.Clone(c.variants[kind])
}

// VariantKeys lists the catalog keys of every kind's variants, sorted and
// without repeats: what a transport that maps keys to templates must know.
func (c *Catalog) VariantKeys() []string {
	var keys []string
	if c == nil {
		return keys
	}
	for _, vs := range c.variants {
		for _, v := range vs {
			if !slices.Contains(keys, v.Key) {
				keys = append(keys, v.Key)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// compileVariants checks the "$variants" entry against the catalog's
// messages: known kinds that take variants, names of lower-case letters,
// digits, "-" and "_", at least two variants (one is the kind's plain
// text), each naming a key the catalog has, and every variant of a kind
// covering every locale any of them, or the kind's own key, has: a user
// gets their language whatever variant they draw.
func compileVariants(raw map[string]map[string]rawTemplate, spec map[string]map[string]string) (map[string][]Variant, []error) {
	out := map[string][]Variant{}
	var errs []error
	for _, kind := range sortedKeys(spec) {
		k, ok := sm.KindOf(sm.Message(kind))
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: unknown message kind %q", VariantsKey, kind))
			continue
		case !slices.Contains(variantKinds, k.Message):
			errs = append(errs, fmt.Errorf("%s: kind %q takes no variants (only %s do)", VariantsKey, kind, kindList()))
			continue
		case len(spec[kind]) < 2:
			errs = append(errs, fmt.Errorf("%s: kind %q has %d variant, want at least two (one is its plain text)", VariantsKey, kind, len(spec[kind])))
			continue
		}
		locales := map[string]string{} // locale -> a key that has it
		for loc := range raw[k.CatalogKey] {
			locales[loc] = k.CatalogKey
		}
		var vs []Variant
		bad := false
		for _, name := range sortedKeys(spec[kind]) {
			key := spec[kind][name]
			switch {
			case !variantName.MatchString(name):
				errs = append(errs, fmt.Errorf("%s: kind %q: variant name %q (want 1 to 32 lower-case letters, digits, - or _)", VariantsKey, kind, name))
				bad = true
			case raw[key] == nil:
				errs = append(errs, fmt.Errorf("%s: kind %q: variant %q names message key %q, which the catalog does not have", VariantsKey, kind, name, key))
				bad = true
			default:
				for loc := range raw[key] {
					if _, seen := locales[loc]; !seen {
						locales[loc] = key
					}
				}
				vs = append(vs, Variant{Name: name, Key: key})
			}
		}
		if bad {
			continue
		}
		for _, v := range vs {
			for _, loc := range sortedKeys(locales) {
				if _, has := raw[v.Key][loc]; !has {
					errs = append(errs, fmt.Errorf("%s: kind %q: variant %q (key %q) has no %s template, which %q has: every variant must cover every locale",
						VariantsKey, kind, v.Name, v.Key, loc, locales[loc]))
				}
			}
		}
		out[kind] = vs
	}
	return out, errs
}

func kindList() string {
	var names []string
	for _, k := range variantKinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// errVariants wraps the problems of a "$variants" entry that is not an
// object of kinds, each an object of variant names to keys.
var errVariants = errors.New(`"$variants" must be an object of message kinds, each an object of variant names to message keys`)
