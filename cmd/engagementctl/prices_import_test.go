package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/pricing"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// sampleRateCard is a rate card in the shape of the CSV Meta's pricing page
// links as "USD rates" (a title line, the header with its quoted
// two-line "Authentication-International", CRLF lines, n/a where a market
// has no such rate, "North America" and the "Rest of …" groups, a blank
// trailing row). Its figures are the test's, not Meta's.
const sampleRateCard = "../../pricing/testdata/ratecard-sample-usd.csv"

// Issue 57: engagementctl prices import turns Meta's USD rate card into a
// prices file (docs/console.md, "What it costs"): each market Meta prices
// on its own becomes its country, North America the +1 numbers, the
// groups ("Rest of …", "Other") are left out and named in the file's
// note; the file says when the card takes effect and where it comes from.
// What it writes is what status --prices-file reads.
func TestPricesImport(t *testing.T) {
	t.Parallel()
	res := cmdtest.Exec(t, ctl.NewCommand, nil, "prices", "import", sampleRateCard, "--effective", "2026-10-01")
	if res.Code != 0 {
		t.Fatalf("prices import: exit %d: %s", res.Code, res.Stderr)
	}
	var p pricing.Prices
	if err := json.Unmarshal([]byte(res.Stdout), &p); err != nil {
		t.Fatalf("stdout is not a prices document: %v: %s", err, res.Stdout)
	}
	if p.AsOf != "2026-10-01" || p.Source != pricing.MetaPricingPage || p.DefaultCountry != "BR" {
		t.Errorf("as_of %q, source %q, default %q; want 2026-10-01, Meta's pricing page, BR", p.AsOf, p.Source, p.DefaultCountry)
	}
	want := map[string]pricing.Country{
		"AR": {CallingCode: "54", Prices: map[sm.Category]float64{"marketing": 0.0618, "utility": 0.026, "authentication": 0.026, "service": 0.026}},
		"BR": {CallingCode: "55", Prices: map[sm.Category]float64{"marketing": 0.0625, "utility": 0.0068, "authentication": 0.0068, "service": 0.0068}},
		"IN": {CallingCode: "91", Prices: map[sm.Category]float64{"marketing": 0.0118, "utility": 0.0014, "authentication": 0.0014, "service": 0.0014}},
		"US": {CallingCode: "1", Prices: map[sm.Category]float64{"marketing": 0.025, "utility": 0.0034, "authentication": 0.0135, "service": 0.0034}},
		"GB": {CallingCode: "44", Prices: map[sm.Category]float64{"marketing": 0.0529, "utility": 0.022, "authentication": 0.0358, "service": 0.022}},
	}
	if got, _ := json.Marshal(p.Countries); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("countries %s; want %s", got, must(json.Marshal(want)))
	}
	for _, s := range []string{"Rest of Western Europe", "Other", "North America", "Authentication-International"} {
		if !strings.Contains(p.Note, s) {
			t.Errorf("note %q does not say what became of %q", p.Note, s)
		}
	}

	// --output writes the file, and says so in one line; status reads it.
	out := filepath.Join(t.TempDir(), "prices.json")
	res = cmdtest.Exec(t, ctl.NewCommand, nil, "prices", "import", sampleRateCard, "--effective", "2026-10-01",
		"--default-country", "US", "--source", "our download of 2026-10-02", "--output", out)
	if res.Code != 0 || len(cmdtest.Lines(res.Stdout)) != 1 || !strings.Contains(res.Stdout, "5 countries") {
		t.Fatalf("prices import --output: exit %d, stdout %q, stderr %s; want one line naming 5 countries", res.Code, res.Stdout, res.Stderr)
	}
	loaded, err := pricing.Load(out)
	if err != nil || loaded.DefaultCountry != "US" || loaded.Source != "our download of 2026-10-02" {
		t.Fatalf("the file written: %+v, %v", loaded, err)
	}
}

// A rate card the import cannot read whole is exit 2 with one line on
// stderr naming what is wrong, and nothing written: not the output file,
// and not over the one already there.
func TestPricesImportRefusesABrokenRateCard(t *testing.T) {
	t.Parallel()
	sample, err := os.ReadFile(sampleRateCard)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name, card, want string
		args             []string
	}{
		{name: "a column missing", card: strings.Replace(string(sample), "Utility,", "", 1), want: "Utility"},
		{name: "not a number", card: strings.Replace(string(sample), "0.0625", "0,0625", 1), want: "Brazil"},
		{name: "not a price", card: strings.Replace(string(sample), "0.0625", "-1", 1), want: "Brazil"},
		{name: "not in dollars", card: strings.ReplaceAll(string(sample), ",USD,", ",BRL,"), want: "USD"},
		{name: "no header", card: "Brazil,USD,0.0625,0.0068,0.0068,n/a,0.0068\n", want: "Market"},
		{name: "no market", card: "Market,Currency,Marketing,Utility,Authentication,Service\n", want: "no market"},
		{name: "a market twice", card: string(sample) + "Brazil,USD,0.07,0.007,0.007,n/a,0.007\n", want: "Brazil"},
		{name: "no effective date", card: string(sample), want: "--effective", args: []string{}},
		{name: "a bad effective date", card: string(sample), want: "--effective", args: []string{"--effective", "October"}},
		{name: "a default country not priced", card: string(sample), want: "PT", args: []string{"--effective", "2026-10-01", "--default-country", "PT"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			card := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".csv")
			if err := os.WriteFile(card, []byte(c.card), 0o600); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
			if err := os.WriteFile(out, []byte("the prices in use"), 0o600); err != nil {
				t.Fatal(err)
			}
			args := c.args
			if args == nil {
				args = []string{"--effective", "2026-10-01"}
			}
			res := cmdtest.Exec(t, ctl.NewCommand, nil, append([]string{"prices", "import", card, "--output", out}, args...)...)
			if res.Code != 2 || len(cmdtest.Lines(res.Stderr)) != 1 || !strings.Contains(res.Stderr, c.want) || res.Stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing on stdout, one line naming %q", res.Code, res.Stdout, res.Stderr, c.want)
			}
			if b, err := os.ReadFile(out); err != nil || string(b) != "the prices in use" {
				t.Errorf("the output file now holds %q (%v); want it untouched", b, err)
			}
		})
	}
	// A file that is not there is bad input too.
	res := cmdtest.Exec(t, ctl.NewCommand, nil, "prices", "import", filepath.Join(dir, "missing.csv"), "--effective", "2026-10-01")
	if res.Code != 2 || len(cmdtest.Lines(res.Stderr)) != 1 {
		t.Errorf("a missing rate card: exit %d, stderr %q; want 2, one line", res.Code, res.Stderr)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
