package pricing_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/pricing"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// The shipped defaults: Brazil, dated, with their source.
func TestDefaults(t *testing.T) {
	t.Parallel()
	p := pricing.Default()
	if p.AsOf != "2026-01-01" || !strings.Contains(p.Source, "developers.facebook.com/docs/whatsapp/pricing") || p.DefaultCountry != "BR" {
		t.Errorf("defaults: as of %q, source %q, default country %q", p.AsOf, p.Source, p.DefaultCountry)
	}
	for cat, want := range map[sm.Category]int64{sm.CategoryMarketing: 62500, sm.CategoryUtility: 6800} {
		if got, ok := p.Price("BR", cat); !ok || got != want {
			t.Errorf("Brazil %s: %d µUSD, %v; want %d", cat, got, ok, want)
		}
	}
	if _, ok := p.Price("BR", sm.CategoryAuthentication); ok {
		t.Error("Brazil's authentication is priced: the project ships no figure for it")
	}
	for jid, want := range map[string]string{
		"5511999990000@s.whatsapp.net": "BR", "5511999990000": "BR", "14155550100@s.whatsapp.net": pricing.Unknown,
		"120363025246125888@g.us": pricing.Unknown, "": pricing.Unknown,
	} {
		if got := p.CountryOf(jid); got != want {
			t.Errorf("CountryOf(%q) = %q, want %q", jid, got, want)
		}
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	p, err := pricing.Load("testdata/prices.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.CountryOf("351912345678@s.whatsapp.net"); got != "PT" {
		t.Errorf("a Portuguese number: %q, want PT", got)
	}
	if got, ok := p.Price("PT", sm.CategoryAuthentication); !ok || got != 20000 {
		t.Errorf("Portugal's authentication: %d, %v", got, ok)
	}
	if got := p.CountryNames(); strings.Join(got, ",") != "BR,PT" {
		t.Errorf("countries %v", got)
	}
}

// A bad file is a clear error naming the file and what is wrong.
func TestLoadRefusesABadFile(t *testing.T) {
	t.Parallel()
	good := `"as_of": "2026-03-01", "source": "https://developers.facebook.com/docs/whatsapp/pricing", "default_country": "BR"`
	br := `"BR": {"calling_code": "55", "prices": {"marketing": 0.0625}}`
	for name, c := range map[string]struct{ body, want string }{
		"not JSON":          {`{as_of`, "not a prices document"},
		"an unknown field":  {`{` + good + `, "currency": "EUR", "countries": {` + br + `}}`, `unknown field "currency"`},
		"no date":           {`{"source": "x", "default_country": "BR", "countries": {` + br + `}}`, "as_of"},
		"no source":         {`{"as_of": "2026-03-01", "default_country": "BR", "countries": {` + br + `}}`, "source"},
		"a country name":    {`{` + good + `, "countries": {"Brazil": {"calling_code": "55", "prices": {"marketing": 0.06}}}}`, `"Brazil" is not an ISO 3166 alpha-2`},
		"a + calling code":  {`{` + good + `, "countries": {"BR": {"calling_code": "+55", "prices": {"marketing": 0.06}}}}`, "calling_code"},
		"a shared code":     {`{` + good + `, "countries": {` + br + `, "XX": {"calling_code": "55", "prices": {}}}}`, "both have calling code 55"},
		"not Meta's":        {`{` + good + `, "countries": {"BR": {"calling_code": "55", "prices": {"promo": 0.06}}}}`, `"promo" is not one of Meta's categories`},
		"a negative price":  {`{` + good + `, "countries": {"BR": {"calling_code": "55", "prices": {"marketing": -1}}}}`, "not a price"},
		"cents, not dollar": {`{` + good + `, "countries": {"BR": {"calling_code": "55", "prices": {"marketing": 625}}}}`, "not a price"},
		"no default prices": {`{"as_of": "2026-03-01", "source": "x", "default_country": "PT", "countries": {` + br + `}}`, `default_country "PT"`},
	} {
		path := filepath.Join(t.TempDir(), "prices.json")
		if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := pricing.Load(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v; want an error naming the file and %q", name, err, c.want)
		}
	}
	if _, err := pricing.Load(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("a missing file: %v", err)
	}
}

func TestForecastGoodbyes(t *testing.T) {
	t.Parallel()
	f := pricing.ForecastGoodbyes(100, nil)
	if f.USD == nil || *f.USD != 6.25 || !strings.Contains(f.Assumption, "marketing in BR") {
		t.Errorf("100 goodbyes: %+v, want US$6.25 as marketing in BR", f)
	}
}

// Issue 60: the forecast's cost is every kind's, each at its own
// category (statemachine.Kinds), not the goodbye's alone.
func TestForecastMessagesCostsEachKindAtItsCategory(t *testing.T) {
	t.Parallel()
	prices := pricing.Default()
	utility, ok := prices.Price(prices.DefaultCountry, sm.CategoryUtility)
	if !ok {
		t.Fatal("the default prices have no utility price")
	}
	f := pricing.ForecastMessages(sm.Default, map[sm.Message]int64{sm.GoodbyeMessage: 100, sm.OptOutConfirmationMessage: 10}, nil)
	if len(f.Kinds) != 2 || f.Kinds[0].Kind != sm.GoodbyeMessage || f.Kinds[1].Category != sm.CategoryUtility || f.Goodbyes != 100 {
		t.Fatalf("kinds %+v, goodbyes %d: want the goodbye's 100 then the confirmations' 10 as utility", f.Kinds, f.Goodbyes)
	}
	if want := 6.25 + pricing.USD(10*utility); f.USD == nil || *f.USD != want {
		t.Errorf("cost %v, want US$%v", f.USD, want)
	}
	if !strings.Contains(f.Assumption, "every opt_out_confirmation delivered and billed as utility") {
		t.Errorf("assumption %q does not say the confirmations' category", f.Assumption)
	}
}
