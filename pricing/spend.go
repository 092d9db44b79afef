package pricing

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// SpendWindow is how far back Spend looks: the last 30 days.
const SpendWindow = 30 * 24 * time.Hour

// UnknownCategory is the category of a message whose kind the kinds table
// does not know and of which Meta said nothing: counted, not priced.
const UnknownCategory = "unknown"

// Spend is what the messages WhatsApp accepted in the window cost on
// Meta's list prices.
type Spend struct {
	Window string    `json:"window"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	// Currency is USD.
	Currency string `json:"currency"`
	// Accepted and Billable count every category's messages; USD is their
	// cost, the priced ones only; Unpriced counts the billable ones with
	// no price (a country or category the prices do not have), not in USD.
	Accepted int64   `json:"accepted"`
	Billable int64   `json:"billable"`
	Unpriced int64   `json:"unpriced"`
	USD      float64 `json:"usd"`
	// Categories are the categories that had messages, in Meta's order
	// (marketing, utility, authentication, service), then any other.
	Categories []CategorySpend `json:"categories"`
	// Prices say which prices were used: their date and source.
	PricesAsOf   string `json:"prices_as_of"`
	PricesSource string `json:"prices_source"`
	// HeldOut is the goodbyes the holdout did not send in the window
	// (engagement-daily --holdout-percent) and what they would have cost,
	// costed as ForecastGoodbyes does: money the control group saved.
	HeldOut Forecast `json:"held_out"`
}

// CategorySpend is one pricing category's messages and cost.
type CategorySpend struct {
	Category string `json:"category"`
	Accepted int64  `json:"accepted"`
	Billable int64  `json:"billable"`
	// Unpriced counts the billable ones with no price, most often a
	// recipient in a country the prices do not have (Unknown).
	Unpriced int64   `json:"unpriced"`
	USD      float64 `json:"usd"`

	micro int64
}

// Querier is what Spend reads from: a pool, a connection or (for a
// consistent page) a transaction.
type Querier = postgres.Querier

// ReadSpend counts and costs the messages accepted in the SpendWindow up
// to asOf (sent, or failed after acceptance), at prices (Default when
// nil): one statement. See queries/spend.sql for what counts as billed.
func ReadSpend(ctx context.Context, db Querier, asOf time.Time, prices *Prices) (Spend, error) {
	if prices == nil {
		prices = Default()
	}
	var kinds, categories []string
	for _, k := range sm.Kinds() {
		kinds, categories = append(kinds, string(k.Message)), append(categories, string(k.Category))
	}
	out := Spend{Window: "30 days", From: asOf.Add(-SpendWindow).UTC(), To: asOf.UTC(), Currency: Currency,
		Categories: []CategorySpend{}, PricesAsOf: prices.AsOf, PricesSource: prices.Source}
	byCat := map[string]*CategorySpend{}
	args := spendArgs{AsOf: asOf, Window: SpendWindow, Kinds: kinds, Categories: categories}
	if err := spendQuery.Each(ctx, db, args, func(r *spendRow) error {
		cat := cmp.Or(r.Category, UnknownCategory)
		c := byCat[cat]
		if c == nil {
			c = &CategorySpend{Category: cat}
			byCat[cat] = c
		}
		c.Accepted += r.Accepted
		c.Billable += r.Billable
		if micro, ok := prices.Price(prices.CountryOf(r.Prefix), sm.Category(cat)); ok {
			c.micro += micro * r.Billable
		} else {
			c.Unpriced += r.Billable
		}
		return nil
	}); err != nil {
		return Spend{}, fmt.Errorf("read the spend: %w", err)
	}
	var total int64
	for _, c := range byCat {
		c.USD = USD(c.micro)
		out.Categories = append(out.Categories, *c)
		out.Accepted += c.Accepted
		out.Billable += c.Billable
		out.Unpriced += c.Unpriced
		total += c.micro
	}
	out.USD = USD(total)
	goodbye, _ := sm.KindOf(sm.GoodbyeMessage)
	held, err := spendHeldOutQuery.One(ctx, db, spendHeldOutArgs{AsOf: asOf, Window: SpendWindow, Trigger: string(goodbye.Trigger)})
	if err != nil {
		return Spend{}, fmt.Errorf("read the goodbyes held out: %w", err)
	}
	out.HeldOut = ForecastGoodbyes(held.HeldOut, prices)
	order := func(c string) int {
		if i := slices.Index(sm.Categories(), sm.Category(c)); i >= 0 {
			return i
		}
		return len(sm.Categories())
	}
	slices.SortFunc(out.Categories, func(a, b CategorySpend) int {
		return cmp.Or(cmp.Compare(order(a.Category), order(b.Category)), cmp.Compare(a.Category, b.Category))
	})
	return out, nil
}

// Forecast is what the goodbyes the coming days' runs would send cost.
type Forecast struct {
	Goodbyes int64 `json:"goodbyes"`
	// USD is their cost, nil when the prices have none for the goodbye's
	// category in the default country.
	USD *float64 `json:"usd"`
	// Assumption says how it was costed.
	Assumption string `json:"assumption"`
}

// ForecastGoodbyes costs goodbyes at the goodbye kind's category in the
// prices' default country, each one delivered: the forecast knows how
// many it would send, not to whom, nor what Meta will say.
func ForecastGoodbyes(goodbyes int64, prices *Prices) Forecast {
	if prices == nil {
		prices = Default()
	}
	k, _ := sm.KindOf(sm.GoodbyeMessage)
	f := Forecast{Goodbyes: goodbyes, Assumption: fmt.Sprintf(
		"every goodbye delivered and billed as %s in %s (the prices' default country), at the prices as of %s",
		k.Category, prices.DefaultCountry, prices.AsOf)}
	if micro, ok := prices.Price(prices.DefaultCountry, k.Category); ok {
		usd := USD(micro * goodbyes)
		f.USD = &usd
	}
	return f
}
