package sender

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
)

//go:embed catalog.json
var embeddedCatalog []byte

const embeddedCatalogName = "embedded catalog.json"

// DefaultLocale is used when a user's locale has no template.
const DefaultLocale = "pt-BR"

// ErrUnknownKey is wrapped by Render for a key the catalog does not have; the
// error message names the key.
var ErrUnknownKey = errors.New("unknown message key")

// Catalog holds message templates by key and locale: it turns a queued
// message's key and params into the text sent to the user, in the user's
// locale. It is immutable and safe for concurrent use; the zero value and nil
// are empty catalogs.
//
// A catalog file is a JSON object of message keys, each an object of locales
// (tags such as "pt-BR" or "en", matched case-insensitively; "_" is read as
// "-") to templates:
//
//	{"engagement.weekly_review.celebration": {"pt-BR": "… {count} …", "en": "… {count} …"}}
//
// Every key must have a DefaultLocale template, and no template may be empty.
// Template syntax, all of it:
//
//	{name}  the value of params["name"]; a name is one or more ASCII letters,
//	        digits or underscores. A param the template names but the caller
//	        does not give is an error; params the template does not name are
//	        ignored. Values are inserted as they are, never expanded again.
//	{{      a literal "{"
//	}}      a literal "}"
//
// Any other use of a brace ("{", "{}", "{a b}", a lone "}") is an error when
// the catalog is loaded, so rendering fails only for an unknown key or a
// missing param.
type Catalog struct {
	messages map[string]*message
	variants map[string][]Variant // by message kind; see VariantsKey
}

// message is one key's templates.
type message struct {
	byLocale map[string]template // canonical locale -> template
	byLang   map[string]template // primary language subtag -> template
	fallback template            // the DefaultLocale template
}

// template is a parsed template: literal text and param names, in order.
type template []segment

type segment struct {
	text  string // literal text, or the param name when param is set
	param bool
}

// defaultCatalog parses the embedded catalog once.
var defaultCatalog = sync.OnceValues(func() (*Catalog, error) {
	raw, variants, problems, err := parseCatalogJSON(embeddedCatalog)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", embeddedCatalogName, err)
	}
	return compileCatalog(embeddedCatalogName, raw, variants, problems)
})

// DefaultCatalog returns the catalog embedded in the binary.
func DefaultCatalog() *Catalog {
	c, err := defaultCatalog()
	if err != nil {
		// Only an invalid catalog.json in the source tree gets here; the
		// package's tests load it.
		panic(err)
	}
	return c
}

// LoadCatalog reads a JSON catalog file (same format) and returns the
// embedded catalog with the file's templates laid over it (key by key,
// locale by locale), so an operator overrides only what they change. Every
// template is validated; errors name the file and say what is wrong. A key
// the embedded catalog does not have must come with a DefaultLocale template.
// The file's "$variants" (VariantsKey) replace the embedded ones kind by
// kind.
func LoadCatalog(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			return nil, fmt.Errorf("catalog %s: %s: %w", path, pe.Op, pe.Err)
		}
		return nil, fmt.Errorf("catalog %s: %w", path, err)
	}
	override, overrideVariants, problems, err := parseCatalogJSON(data)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", path, err)
	}
	base, variants, embeddedProblems, err := parseCatalogJSON(embeddedCatalog)
	if err == nil {
		err = errors.Join(embeddedProblems...)
	}
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", embeddedCatalogName, err)
	}
	// The embedded templates are valid (the tests load them), so every
	// problem found from here on is the file's.
	for key, locales := range override {
		if base[key] == nil {
			base[key] = map[string]rawTemplate{}
		}
		for locale, t := range locales {
			base[key][locale] = t
		}
	}
	for kind, vs := range overrideVariants {
		variants[kind] = vs
	}
	return compileCatalog(path, base, variants, problems)
}

// Render renders key in locale with params. The locale falls back from an
// exact match (case-insensitive, "pt-br" == "pt-BR") to a template of the
// same primary language ("en-US" -> "en", "pt" -> "pt-BR") and then to
// DefaultLocale. An unknown key is an error wrapping ErrUnknownKey; a param
// the template needs and params lacks is an error naming both.
func (c *Catalog) Render(key, locale string, params map[string]string) (string, error) {
	var m *message
	if c != nil {
		m = c.messages[key]
	}
	if m == nil {
		return "", fmt.Errorf("%w %q", ErrUnknownKey, key)
	}
	return m.lookup(locale).execute(key, params)
}

// Keys lists the catalog's message keys, sorted.
func (c *Catalog) Keys() []string {
	if c == nil {
		return []string{}
	}
	return sortedKeys(c.messages)
}

// lookup picks the template for locale (see Render).
func (m *message) lookup(locale string) template {
	loc := canonicalLocale(locale)
	if t, ok := m.byLocale[loc]; ok {
		return t
	}
	if t, ok := m.byLang[primaryLanguage(loc)]; ok {
		return t
	}
	return m.fallback
}

// execute renders t with params.
func (t template) execute(key string, params map[string]string) (string, error) {
	var b strings.Builder
	for _, s := range t {
		if !s.param {
			b.WriteString(s.text)
			continue
		}
		v, ok := params[s.text]
		if !ok {
			return "", fmt.Errorf("missing param %q for message key %q", s.text, key)
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// rawTemplate is a template as written, under its canonical locale.
type rawTemplate struct {
	locale string // as written in the file
	text   string
}

// parseCatalogJSON decodes a catalog file into key -> canonical locale ->
// template, and its "$variants" entry (VariantsKey) as written. err is set
// when data is not a catalog at all; problems lists the keys and locales
// that are wrong, which raw leaves out.
func parseCatalogJSON(data []byte) (raw map[string]map[string]rawTemplate, variants map[string]map[string]string, problems []error, err error) {
	const want = "invalid JSON (want an object of message keys, each an object of locale to template string)"
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", want, err)
	}
	if top == nil {
		return nil, nil, nil, fmt.Errorf("%s: got null", want)
	}
	variants = map[string]map[string]string{}
	if v, ok := top[VariantsKey]; ok {
		delete(top, VariantsKey)
		if err := json.Unmarshal(v, &variants); err != nil {
			problems = append(problems, fmt.Errorf("%w: %w", errVariants, err))
		}
	}
	doc := make(map[string]map[string]string, len(top))
	for key, v := range top {
		var locales map[string]string
		if err := json.Unmarshal(v, &locales); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: key %q: %w", want, key, err)
		}
		doc[key] = locales
	}
	raw = make(map[string]map[string]rawTemplate, len(doc))
	for _, key := range sortedKeys(doc) {
		if strings.TrimSpace(key) == "" {
			problems = append(problems, errors.New("empty message key"))
			continue
		}
		if strings.HasPrefix(key, "$") {
			problems = append(problems, fmt.Errorf("unknown entry %q (keys starting with \"$\" are reserved; %q lists variants)", key, VariantsKey))
			continue
		}
		locales := make(map[string]rawTemplate, len(doc[key]))
		for _, locale := range sortedKeys(doc[key]) {
			canon := canonicalLocale(locale)
			switch prev, dup := locales[canon]; {
			case !validLocale(canon):
				problems = append(problems, fmt.Errorf("key %q: invalid locale %q (want a tag like \"pt-BR\" or \"en\")", key, locale))
			case dup:
				problems = append(problems, fmt.Errorf("key %q: locale %q given twice (as %q and %q)", key, canon, prev.locale, locale))
			default:
				locales[canon] = rawTemplate{locale: locale, text: doc[key][locale]}
			}
		}
		raw[key] = locales
	}
	return raw, variants, problems, nil
}

// compileCatalog parses every template of raw into a Catalog. It fails,
// naming the source name, when a template is wrong or problems (found
// earlier) is not empty.
func compileCatalog(name string, raw map[string]map[string]rawTemplate, variants map[string]map[string]string, problems []error) (*Catalog, error) {
	c := &Catalog{messages: make(map[string]*message, len(raw))}
	defaultLoc := canonicalLocale(DefaultLocale)
	errs := problems
	var variantErrs []error
	c.variants, variantErrs = compileVariants(raw, variants)
	errs = append(errs, variantErrs...)
	rank := func(loc string) int { // lower wins a language's template
		switch loc {
		case primaryLanguage(loc):
			return 0
		case defaultLoc:
			return 1
		}
		return 2
	}
	for _, key := range sortedKeys(raw) {
		m := &message{byLocale: map[string]template{}, byLang: map[string]template{}}
		locales := sortedKeys(raw[key])
		for _, loc := range locales {
			text := raw[key][loc].text
			if strings.TrimSpace(text) == "" {
				errs = append(errs, fmt.Errorf("key %q, locale %q: empty template", key, raw[key][loc].locale))
				continue
			}
			t, err := parseTemplate(text)
			if err != nil {
				errs = append(errs, fmt.Errorf("key %q, locale %q: %w", key, raw[key][loc].locale, err))
				continue
			}
			m.byLocale[loc] = t
		}
		if _, ok := raw[key][defaultLoc]; !ok {
			errs = append(errs, fmt.Errorf("key %q: no %s template (every key needs one, the default locale)", key, DefaultLocale))
		}
		m.fallback = m.byLocale[defaultLoc]
		// A language's template: the bare language ("pt") if the key has it,
		// else the default locale if it is of that language, else the
		// language's first locale in sorted order.
		chosen := map[string]string{}
		for _, loc := range locales {
			t, ok := m.byLocale[loc]
			if !ok {
				continue
			}
			lang := primaryLanguage(loc)
			if prev, taken := chosen[lang]; !taken || rank(loc) < rank(prev) {
				chosen[lang] = loc
				m.byLang[lang] = t
			}
		}
		c.messages[key] = m
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("catalog %s: %w", name, errors.Join(errs...))
	}
	return c, nil
}

// parseTemplate parses s (see the syntax above).
func parseTemplate(s string) (template, error) {
	var t template
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t = append(t, segment{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			if i+1 < len(s) && s[i+1] == '{' {
				lit.WriteByte('{')
				i++
				continue
			}
			start := i
			j := i + 1
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			switch {
			case j < len(s) && s[j] == '}' && j > start+1:
				flush()
				t = append(t, segment{text: s[start+1 : j], param: true})
				i = j
			case j < len(s) && s[j] == '}':
				return nil, fmt.Errorf(`empty placeholder "{}" at byte %d (write "{{" for a literal "{")`, start)
			case !strings.Contains(s[j:], "}"):
				return nil, fmt.Errorf(`unclosed "{" at byte %d (write "{{" for a literal "{")`, start)
			default:
				return nil, fmt.Errorf(`invalid character %q in placeholder at byte %d (names are ASCII letters, digits and "_"; write "{{" for a literal "{")`, s[j], j)
			}
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				lit.WriteByte('}')
				i++
				continue
			}
			return nil, fmt.Errorf(`unmatched "}" at byte %d (write "}}" for a literal "}")`, i)
		default:
			lit.WriteByte(s[i])
		}
	}
	flush()
	return t, nil
}

func isNameByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// canonicalLocale lower-cases locale and reads "_" as "-": "pt_BR" -> "pt-br".
func canonicalLocale(locale string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(locale)), "_", "-")
}

// primaryLanguage is the primary language subtag of a canonical locale.
func primaryLanguage(loc string) string {
	lang, _, _ := strings.Cut(loc, "-")
	return lang
}

// validLocale reports whether a canonical locale is a plausible tag: ASCII
// letters and digits in "-"-separated, non-empty subtags.
func validLocale(loc string) bool {
	if loc == "" {
		return false
	}
	for sub := range strings.SplitSeq(loc, "-") {
		if sub == "" {
			return false
		}
		for i := 0; i < len(sub); i++ {
			if !('a' <= sub[i] && sub[i] <= 'z' || '0' <= sub[i] && sub[i] <= '9') {
				return false
			}
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
