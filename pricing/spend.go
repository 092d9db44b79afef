package pricing

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// SpendWindow is how far back Spend looks: the last 30 days.
const SpendWindow = 30 * 24 * time.Hour

// FreeUtilityInWindowUntil is when Meta stopped giving utility templates
// delivered inside an open customer service window for free. Meta made
// them free on 2025-07-01 ("Pricing on the WhatsApp Business Platform",
// https://developers.facebook.com/documentation/business-messaging/whatsapp/pricing:
// "Utility templates delivered within an open customer service window are
// free") and charges for them again from 2026-10-01: Meta's page
// "Upcoming pricing updates for Meta Business Agent, service and utility
// messages" (updated 2026-07-01; read in a copy of Meta's developer
// documentation, https://nermalcat69.github.io/meta-developer-docs/documentation/business-messaging/whatsapp/pricing/authentication-international-rates.html,
// as Meta's own address for it could not be read) says "Effective October
// 1, 2026, Meta will charge for utility messages sent in response to users
// within an open 24-hour customer service window". Meta's webhook says so
// too (billable true); where it has said nothing the scheduler takes UTC
// midnight, not the business account's time zone Meta dates by.
var FreeUtilityInWindowUntil = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

// UnknownCategory is the category of a message whose kind the kinds table
// does not know and of which Meta said nothing: counted, not priced.
const UnknownCategory = "unknown"

// Spend is what Meta bills for the messages its Cloud API accepted in the
// window, on Meta's list prices: Meta charges a message when it is
// delivered ("Pricing on the WhatsApp Business Platform",
// https://developers.facebook.com/docs/whatsapp/pricing: per-message
// pricing since July 2025; "you are charged each time a billable message
// is delivered", https://developers.facebook.com/documentation/business-messaging/whatsapp/groups/pricing/).
// Messages another transport sent (the bot's webhook, Baileys; the log)
// cost Meta nothing: NotMeta counts them, never in USD.
type Spend struct {
	Window string    `json:"window"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	// Currency is USD.
	Currency string `json:"currency"`
	// Accepted counts the messages Meta's Cloud API accepted in the window
	// (sent, or failed after acceptance), every category's. Each is
	// Delivered (a delivered or read receipt came), Failed (failed after
	// acceptance and never delivered: never billed, whatever the pricing
	// of its sent status said) or Awaiting (neither yet: billed only if it
	// is delivered).
	Accepted  int64 `json:"accepted"`
	Delivered int64 `json:"delivered"`
	Failed    int64 `json:"failed"`
	Awaiting  int64 `json:"awaiting"`
	// Billable counts the delivered ones Meta bills: all but those Meta's
	// webhook said were free (billable false: a free entry point, ...) and,
	// of which Meta said nothing, the utility ones delivered inside the
	// customer service window before FreeUtilityInWindowUntil. USD is their cost,
	// the priced ones only; Unpriced counts the billed ones with no price
	// (a country or category the prices do not have), not in USD.
	Billable int64   `json:"billable"`
	Unpriced int64   `json:"unpriced"`
	USD      float64 `json:"usd"`
	// AwaitingUSD is what the awaiting ones would cost if all were
	// delivered (those Meta has not said are free, priced ones only): not
	// spent yet, not in USD.
	AwaitingUSD float64 `json:"awaiting_usd"`
	// Categories are the categories of the Cloud API's messages, in
	// Meta's order (marketing, utility, authentication, service), then
	// any other.
	Categories []CategorySpend `json:"categories"`
	// NotMeta are the messages sent in the window through a transport
	// that is not Meta's Cloud API, by transport (in name order; "" when
	// the send ledger has no row for them and Meta never priced them):
	// no Meta cost.
	NotMeta []TransportMessages `json:"not_meta"`
	// Prices say which prices were used: their date and source.
	PricesAsOf   string `json:"prices_as_of"`
	PricesSource string `json:"prices_source"`
	// HeldOut is the goodbyes the holdout did not send in the window
	// (engagement-daily --holdout-percent) and what they would have cost,
	// costed as ForecastGoodbyes does: money the control group saved.
	HeldOut Forecast `json:"held_out"`
}

// CategorySpend is one pricing category's Cloud API messages and cost,
// counted as Spend's.
type CategorySpend struct {
	Category  string `json:"category"`
	Accepted  int64  `json:"accepted"`
	Delivered int64  `json:"delivered"`
	Failed    int64  `json:"failed"`
	Awaiting  int64  `json:"awaiting"`
	Billable  int64  `json:"billable"`
	// Unpriced counts the billed ones with no price, most often a
	// recipient in a country the prices do not have (Unknown).
	Unpriced    int64   `json:"unpriced"`
	USD         float64 `json:"usd"`
	AwaitingUSD float64 `json:"awaiting_usd"`

	micro, awaitingMicro int64
}

// TransportMessages are the messages one transport that is not Meta's
// Cloud API sent in the window: accepted by it (sent, or failed after),
// and how many a receipt says were delivered. Meta bills none of them.
type TransportMessages struct {
	Transport string `json:"transport"`
	Messages  int64  `json:"messages"`
	Delivered int64  `json:"delivered"`
}

// MetaTransport is the send ledger's name of Meta's Cloud API transport
// (queue-process --transport whatsapp-cloud): the only one whose messages
// Meta bills.
const MetaTransport = transport.WhatsAppName

// Querier is what Spend reads from: a pool, a connection or (for a
// consistent page) a transaction.
type Querier = postgres.Querier

// ReadSpend counts and costs the messages accepted in the SpendWindow up
// to asOf (sent, or failed after acceptance), at prices (Default when
// nil): one statement. See queries/spend.sql for what counts as billed
// and how a message's transport is known.
func ReadSpend(ctx context.Context, db Querier, asOf time.Time, prices *Prices) (Spend, error) {
	if prices == nil {
		prices = Default()
	}
	var kinds, categories []string
	for _, k := range sm.Kinds() {
		kinds, categories = append(kinds, string(k.Message)), append(categories, string(k.Category))
	}
	out := Spend{Window: "30 days", From: asOf.Add(-SpendWindow).UTC(), To: asOf.UTC(), Currency: Currency,
		Categories: []CategorySpend{}, NotMeta: []TransportMessages{}, PricesAsOf: prices.AsOf, PricesSource: prices.Source}
	byCat := map[string]*CategorySpend{}
	args := spendArgs{AsOf: asOf, Window: SpendWindow, MetaTransport: MetaTransport, Kinds: kinds, Categories: categories,
		FreeUtilityUntil: FreeUtilityInWindowUntil}
	if err := spendQuery.Each(ctx, db, args, func(r *spendRow) error {
		if r.Transport != MetaTransport {
			// One row per transport: the statement groups them without
			// category or prefix.
			out.NotMeta = append(out.NotMeta, TransportMessages{Transport: r.Transport, Messages: r.Accepted, Delivered: r.Delivered})
			return nil
		}
		cat := cmp.Or(r.Category, UnknownCategory)
		c := byCat[cat]
		if c == nil {
			c = &CategorySpend{Category: cat}
			byCat[cat] = c
		}
		c.Accepted += r.Accepted
		c.Delivered += r.Delivered
		c.Failed += r.Failed
		c.Awaiting += r.Awaiting
		c.Billable += r.Billed
		if micro, ok := prices.Price(prices.CountryOf(r.Prefix), sm.Category(cat)); ok {
			c.micro += micro * r.Billed
			c.awaitingMicro += micro * r.AwaitingBillable
		} else {
			c.Unpriced += r.Billed
		}
		return nil
	}); err != nil {
		return Spend{}, fmt.Errorf("read the spend: %w", err)
	}
	out.addCategories(byCat)
	goodbye, _ := sm.KindOf(sm.GoodbyeMessage)
	held, err := spendHeldOutQuery.One(ctx, db, spendHeldOutArgs{AsOf: asOf, Window: SpendWindow, Trigger: string(goodbye.Trigger)})
	if err != nil {
		return Spend{}, fmt.Errorf("read the goodbyes held out: %w", err)
	}
	out.HeldOut = ForecastGoodbyes(held.HeldOut, prices)
	sortCategories(out.Categories)
	return out, nil
}

// addCategories puts each category's spend in out, in dollars, and adds
// it to out's totals.
func (out *Spend) addCategories(byCat map[string]*CategorySpend) {
	var total, awaiting int64
	for _, c := range byCat {
		c.USD, c.AwaitingUSD = USD(c.micro), USD(c.awaitingMicro)
		out.Categories = append(out.Categories, *c)
		out.Accepted += c.Accepted
		out.Delivered += c.Delivered
		out.Failed += c.Failed
		out.Awaiting += c.Awaiting
		out.Billable += c.Billable
		out.Unpriced += c.Unpriced
		total += c.micro
		awaiting += c.awaitingMicro
	}
	out.USD, out.AwaitingUSD = USD(total), USD(awaiting)
}

// sortCategories orders the categories as sm.Categories lists them, any
// it does not know last, by name.
func sortCategories(categories []CategorySpend) {
	order := func(c string) int {
		if i := slices.Index(sm.Categories(), sm.Category(c)); i >= 0 {
			return i
		}
		return len(sm.Categories())
	}
	slices.SortFunc(categories, func(a, b CategorySpend) int {
		return cmp.Or(cmp.Compare(order(a.Category), order(b.Category)), cmp.Compare(a.Category, b.Category))
	})
}

// NotMetaMessages is how many messages of the window went through a
// transport Meta does not bill.
func (s Spend) NotMetaMessages() int64 {
	var n int64
	for _, t := range s.NotMeta {
		n += t.Messages
	}
	return n
}

// Forecast is what the messages the coming days' runs would queue cost:
// those of every kind a timer of the state machine queues
// (statemachine.Kinds), each at its kind's category.
type Forecast struct {
	// Goodbyes is how many of them are goodbyes.
	Goodbyes int64 `json:"goodbyes"`
	// USD is their cost, nil when the prices have none for some kind's
	// category in the default country.
	USD *float64 `json:"usd"`
	// Assumption says how it was costed.
	Assumption string `json:"assumption"`
	// Kinds are the messages of each kind and their cost, in the kinds
	// table's order.
	Kinds []KindForecast `json:"kinds"`
}

// KindForecast is the messages of one kind a forecast costs.
type KindForecast struct {
	Kind     sm.Message  `json:"kind"`
	Category sm.Category `json:"category"`
	Messages int64       `json:"messages"`
	// USD is their cost, nil when the prices have none for the category.
	USD *float64 `json:"usd"`
}

// ForecastGoodbyes costs goodbyes as ForecastMessages does.
func ForecastGoodbyes(goodbyes int64, prices *Prices) Forecast {
	return ForecastMessages(sm.Default, map[sm.Message]int64{sm.GoodbyeMessage: goodbyes}, prices)
}

// ForecastMessages costs messages by kind, each at its kind's category
// (machine.Kinds, in their order) in the prices' default country, each one
// delivered: the forecast knows how many it would send, not to whom, nor
// what Meta will say. A message type that is no kind of machine is not
// costed.
func ForecastMessages(machine sm.Machine, messages map[sm.Message]int64, prices *Prices) Forecast {
	if prices == nil {
		prices = Default()
	}
	f := Forecast{Kinds: []KindForecast{}}
	var micro int64
	priced := true
	var billed []string
	for _, k := range machine.Kinds() {
		n, ok := messages[k.Message]
		if !ok {
			continue
		}
		kf := KindForecast{Kind: k.Message, Category: k.Category, Messages: n}
		if price, ok := prices.Price(prices.DefaultCountry, k.Category); ok {
			kf.USD = ptr(USD(price * n))
			micro += price * n
		} else {
			priced = false
		}
		if k.Message == sm.GoodbyeMessage {
			f.Goodbyes = n
		}
		billed = append(billed, fmt.Sprintf("every %s delivered and billed as %s", k.Message, k.Category))
		f.Kinds = append(f.Kinds, kf)
	}
	if priced {
		f.USD = ptr(USD(micro))
	}
	if len(billed) == 0 {
		billed = []string{"no message"}
	}
	f.Assumption = fmt.Sprintf("%s in %s (the prices' default country), at the prices as of %s",
		strings.Join(billed, ", "), prices.DefaultCountry, prices.AsOf)
	return f
}

func ptr[T any](v T) *T { return &v }
