package pricing

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// MetaPricingPage is Meta's pricing page, which links the rate cards, one
// CSV file per currency ("USD rates", ...).
const MetaPricingPage = "https://developers.facebook.com/documentation/business-messaging/whatsapp/pricing"

// RateCard is what ImportRateCard needs besides the file: the day the
// card takes effect (Meta's file does not say it), where it comes from
// and the country the forecast prices its goodbyes in.
type RateCard struct {
	Effective      string // YYYY-MM-DD
	Source         string
	DefaultCountry string
}

// rateColumns are the columns of Meta's rate card the import reads, by
// their header with everything but letters left out ("Authentication-
// International" is quoted over two lines), and the category each prices.
var rateColumns = []struct {
	header   string
	category sm.Category
}{
	{"marketing", sm.CategoryMarketing},
	{"utility", sm.CategoryUtility},
	{"authentication", sm.CategoryAuthentication},
	{"service", sm.CategoryService},
}

// markets are the markets Meta's rate card prices on their own, by their
// name on the card (lower case), as the country and calling code the
// prices key them by. North America is Canada and the United States, both
// +1: one entry, US. Kazakhstan shares Russia's +7 and is left out, as are
// the groups ("Rest of Africa", ..., "Other"), whose countries the card
// does not list.
var markets = map[string]struct{ country, callingCode string }{
	"argentina": {"AR", "54"}, "bangladesh": {"BD", "880"}, "brazil": {"BR", "55"}, "chile": {"CL", "56"},
	"colombia": {"CO", "57"}, "egypt": {"EG", "20"}, "france": {"FR", "33"}, "germany": {"DE", "49"},
	"india": {"IN", "91"}, "indonesia": {"ID", "62"}, "iraq": {"IQ", "964"}, "israel": {"IL", "972"},
	"italy": {"IT", "39"}, "kuwait": {"KW", "965"}, "malaysia": {"MY", "60"}, "mexico": {"MX", "52"},
	"morocco": {"MA", "212"}, "nepal": {"NP", "977"}, "netherlands": {"NL", "31"}, "nigeria": {"NG", "234"},
	"north america": {"US", "1"}, "oman": {"OM", "968"}, "pakistan": {"PK", "92"}, "peru": {"PE", "51"},
	"russia": {"RU", "7"}, "saudi arabia": {"SA", "966"}, "south africa": {"ZA", "27"}, "spain": {"ES", "34"},
	"sri lanka": {"LK", "94"}, "turkey": {"TR", "90"}, "türkiye": {"TR", "90"}, "ukraine": {"UA", "380"},
	"united arab emirates": {"AE", "971"}, "united kingdom": {"GB", "44"},
}

// ErrRateCard marks a rate card the import cannot read whole.
var ErrRateCard = errors.New("rate card")

// ImportRateCard reads Meta's rate card in US dollars, the CSV file
// Meta's pricing page links as "USD rates": lines before the header (a
// title), the header Market, Currency, Marketing, Utility, Authentication,
// Authentication-International, Service (Service may be missing), then a
// row per market, "n/a" where a market has no such rate. It returns the
// prices of every market the card prices on its own (markets), checked as
// Load checks a file; its note names what was left out. A missing column,
// a market twice, a rate that is not a price in US dollars or a currency
// other than USD is an error wrapping ErrRateCard, naming the row.
func ImportRateCard(r io.Reader, card RateCard) (*Prices, error) {
	if _, err := time.Parse(time.DateOnly, card.Effective); err != nil {
		return nil, fmt.Errorf("%w: the effective date %q is not a date (YYYY-MM-DD)", ErrRateCard, card.Effective)
	}
	rows := csv.NewReader(r)
	rows.FieldsPerRecord = -1
	cols, err := readHeader(rows)
	if err != nil {
		return nil, err
	}
	p := &Prices{AsOf: card.Effective, Source: card.Source, DefaultCountry: card.DefaultCountry, Countries: map[string]Country{}}
	var left []string
	for {
		rec, err := rows.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRateCard, err)
		}
		line, _ := rows.FieldPos(0)
		name := strings.TrimSpace(rec[0])
		m, ok := markets[strings.ToLower(name)]
		switch {
		case name == "":
			continue
		case !ok:
			left = append(left, name)
			continue
		case p.Countries[m.country].CallingCode != "":
			return nil, fmt.Errorf("%w: line %d: %s is on the card twice", ErrRateCard, line, name)
		}
		prices, err := readRates(rec, cols)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d (%s): %w", ErrRateCard, line, name, err)
		}
		p.Countries[m.country] = Country{CallingCode: m.callingCode, Prices: prices}
	}
	if len(p.Countries) == 0 {
		return nil, fmt.Errorf("%w: no market the scheduler prices (%s)", ErrRateCard, strings.Join(slices.Sorted(maps.Keys(markets)), ", "))
	}
	p.Note = importNote(left, cols)
	return checked(p)
}

// columns are where readHeader found the columns: currency, and each
// category's (-1 for one the card does not have).
type columns struct {
	currency int
	rates    []int // by rateColumns
	authIntl bool  // the card has Authentication-International
}

// readHeader skips the lines before the header and finds the columns.
func readHeader(rows *csv.Reader) (columns, error) {
	for {
		rec, err := rows.Read()
		if errors.Is(err, io.EOF) {
			return columns{}, fmt.Errorf("%w: no header (Market,Currency,Marketing,Utility,Authentication,...): not Meta's rate card", ErrRateCard)
		}
		if err != nil {
			return columns{}, fmt.Errorf("%w: %w", ErrRateCard, err)
		}
		if letters(rec[0]) != "market" {
			continue
		}
		at := map[string]int{}
		for i, h := range rec {
			at[letters(h)] = i
		}
		cols := columns{currency: index(at, "currency"), authIntl: index(at, "authenticationinternational") >= 0}
		for _, c := range rateColumns {
			cols.rates = append(cols.rates, index(at, c.header))
		}
		for i, c := range rateColumns[:3] {
			if cols.rates[i] < 0 {
				return columns{}, fmt.Errorf("%w: no %s column in its header", ErrRateCard, strings.ToUpper(c.header[:1])+c.header[1:])
			}
		}
		if cols.currency < 0 {
			return columns{}, fmt.Errorf("%w: no Currency column in its header", ErrRateCard)
		}
		return cols, nil
	}
}

// readRates reads one market's row: its currency must be USD (or $US, as
// older cards wrote it); n/a or empty leaves a category unpriced.
func readRates(rec []string, cols columns) (map[sm.Category]float64, error) {
	if cur := field(rec, cols.currency); cur != "USD" && cur != "$US" {
		return nil, fmt.Errorf("currency %q: the import reads Meta's USD rate card", cur)
	}
	prices := map[sm.Category]float64{}
	for i, c := range rateColumns {
		v := strings.TrimPrefix(field(rec, cols.rates[i]), "$")
		if cols.rates[i] < 0 || v == "" || strings.EqualFold(v, "n/a") {
			continue
		}
		usd, err := strconv.ParseFloat(v, 64)
		if err != nil || !(usd >= 0 && usd <= maxUSD) {
			return nil, fmt.Errorf("%s rate %q is not a price in US dollars per message (a number, 0 to %v)", c.category, v, maxUSD)
		}
		prices[c.category] = usd
	}
	return prices, nil
}

// importNote says what the import left out.
func importNote(left []string, cols columns) string {
	note := "Imported from Meta's rate card in USD (engagementctl prices import). North America (Canada and the United States, +1) is US."
	if cols.authIntl {
		note += " Authentication-International rates are not imported (authentication is priced at the market's rate)."
	}
	if len(left) > 0 {
		note += " Not imported, their recipients counted as not priced (groups, or markets without a calling code of their own): " +
			strings.Join(left, ", ") + "."
	}
	return note
}

// checked runs the checks Load runs on p.
func checked(p *Prices) (*Prices, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	out, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRateCard, err)
	}
	return out, nil
}

func letters(s string) string {
	return strings.ToLower(strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) {
			return r
		}
		return -1
	}, s))
}

func index(at map[string]int, header string) int {
	if i, ok := at[header]; ok {
		return i
	}
	return -1
}

func field(rec []string, i int) string {
	if i < 0 || i >= len(rec) {
		return ""
	}
	return strings.TrimSpace(rec[i])
}
