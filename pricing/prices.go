// Package pricing says what the scheduler's messages cost on Meta's
// WhatsApp Cloud API (issue 43, "What it costs"): since July 2025 Meta
// bills per delivered template, at a price per category (marketing,
// utility, authentication; service is free) and per the recipient's
// country. Prices holds those prices, from a JSON file or the shipped,
// dated defaults; Spend counts and costs the messages of the last 30 days
// as Meta bills them: a Cloud API message when it is delivered, never one
// that failed (issue 55).
//
// Every figure is an estimate of Meta's list price only: volume tiers,
// a business solution provider's fee and taxes are not in it, and a
// message the bot's own connection (Baileys, the webhook transport) or
// the log transport sent costs Meta nothing: Spend counts those apart.
package pricing

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Unknown is the country of a recipient whose calling code is none of the
// prices' countries (or a group): its messages are counted, not priced.
const Unknown = "unknown"

// Currency is the currency of every price: Meta's rate cards are in US
// dollars (and others; the scheduler reads the dollar one).
const Currency = "USD"

// Prices are Meta's per-message prices in US dollars, per country and
// category, and where they come from.
type Prices struct {
	// AsOf is the day the prices take effect (an imported rate card's) or
	// were read off their source (YYYY-MM-DD).
	AsOf string `json:"as_of"`
	// Source is where they come from: Meta's pricing page and rate card.
	Source string `json:"source"`
	// Note says anything else about them (e.g. not confirmed).
	Note string `json:"note,omitempty"`
	// DefaultCountry is the country the forecast prices its goodbyes in.
	DefaultCountry string `json:"default_country"`
	// Countries are the countries priced, by ISO 3166 alpha-2 code.
	Countries map[string]Country `json:"countries"`
}

// Country is one country's calling code and prices.
type Country struct {
	// CallingCode is the country's calling code, without "+": "55". A
	// recipient's WhatsApp id (<number>@s.whatsapp.net) starts with it.
	CallingCode string `json:"calling_code"`
	// Prices are US dollars per delivered message, by Meta's category
	// (marketing, utility, authentication, service). A category left out
	// is not priced: its messages are counted as unpriced.
	Prices map[sm.Category]float64 `json:"prices"`
}

//go:embed defaults.json
var defaultsJSON []byte

// Default returns the shipped prices (defaults.json): Brazil's, as of
// early 2026.
func Default() *Prices {
	p, err := parse(defaultsJSON)
	if err != nil {
		panic("pricing: the shipped defaults.json: " + err.Error())
	}
	return p
}

// Load reads prices from the JSON file at path (the format of
// defaults.json; see docs/console.md, "What it costs"). An unknown field,
// a country that is not two capital letters, a calling code that is not
// 1 to 3 digits or is two countries', a category that is not Meta's, a
// negative price or a default country without prices is an error naming
// the file.
func Load(path string) (*Prices, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prices file: %w", err)
	}
	p, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("prices file %s: %w", path, err)
	}
	return p, nil
}

// maxUSD is the highest price per message a prices file may hold: any
// higher is a mistake (a price in cents, in another currency).
const maxUSD = 10

var (
	alpha2      = regexp.MustCompile(`^[A-Z]{2}$`)
	callingCode = regexp.MustCompile(`^[1-9][0-9]{0,2}$`)
)

func parse(b []byte) (*Prices, error) {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	var p Prices
	if err := d.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a prices document: %w", err)
	}
	if d.More() {
		return nil, errors.New("not a prices document: more than one JSON value")
	}
	if _, err := time.Parse(time.DateOnly, p.AsOf); err != nil {
		return nil, fmt.Errorf("as_of %q is not a date (YYYY-MM-DD): say when the prices were read", p.AsOf)
	}
	if strings.TrimSpace(p.Source) == "" {
		return nil, errors.New("source is empty: say where the prices come from")
	}
	if len(p.Countries) == 0 {
		return nil, errors.New("countries is empty: no price for any country")
	}
	codes := map[string]string{}
	for name, c := range p.Countries {
		if !alpha2.MatchString(name) {
			return nil, fmt.Errorf("country %q is not an ISO 3166 alpha-2 code (two capital letters)", name)
		}
		if !callingCode.MatchString(c.CallingCode) {
			return nil, fmt.Errorf("country %s: calling_code %q is not 1 to 3 digits", name, c.CallingCode)
		}
		if other, ok := codes[c.CallingCode]; ok {
			return nil, fmt.Errorf("countries %s and %s both have calling code %s", min(name, other), max(name, other), c.CallingCode)
		}
		codes[c.CallingCode] = name
		for cat, usd := range c.Prices {
			if !cat.Valid() {
				return nil, fmt.Errorf("country %s: %q is not one of Meta's categories (%v)", name, cat, sm.Categories())
			}
			if !(usd >= 0 && usd <= maxUSD) {
				return nil, fmt.Errorf("country %s: %s price %v is not a price in US dollars per message (0 to %v)", name, cat, usd, maxUSD)
			}
		}
	}
	if c, ok := p.Countries[p.DefaultCountry]; !ok || len(c.Prices) == 0 {
		return nil, fmt.Errorf("default_country %q is not one of the countries priced", p.DefaultCountry)
	}
	return &p, nil
}

// CountryOf returns the country of a WhatsApp id (<number>@s.whatsapp.net,
// or a bare number): the one whose calling code starts the number, the
// longest when several do; Unknown for a group (…@g.us) or a number no
// country priced has.
func (p *Prices) CountryOf(jid string) string {
	num, domain, _ := strings.Cut(jid, "@")
	if domain != "" && domain != "s.whatsapp.net" {
		return Unknown
	}
	best, bestLen := Unknown, 0
	for name, c := range p.Countries {
		if strings.HasPrefix(num, c.CallingCode) && len(c.CallingCode) > bestLen {
			best, bestLen = name, len(c.CallingCode)
		}
	}
	return best
}

// Price returns the price of one delivered message of category in
// country, in millionths of a US dollar (exact sums), and false when it
// has none (an unknown country, a category not priced there).
func (p *Prices) Price(country string, category sm.Category) (micro int64, ok bool) {
	c, found := p.Countries[country]
	if !found {
		return 0, false
	}
	usd, found := c.Prices[category]
	if !found {
		return 0, false
	}
	return int64(math.Round(usd * 1e6)), true
}

// CountryNames returns the priced countries, sorted.
func (p *Prices) CountryNames() []string {
	out := make([]string, 0, len(p.Countries))
	for name := range p.Countries {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// USD turns millionths of a dollar into dollars.
func USD(micro int64) float64 { return float64(micro) / 1e6 }
