package pricing_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/pricing"
)

// The spend of the last 30 days on a real database, as Meta bills it
// (issue 55): a Cloud API message is billed when a receipt says it was
// delivered, unless Meta said it is free; a failure after acceptance never
// is, even after a sent status that said billable; one with no receipt yet
// awaits. The category is Meta's where it said, else the kind's; an unknown
// country is counted unpriced. Messages another transport sent (the
// webhook, the log; the send ledger says which) cost Meta nothing, and are
// counted by transport; messages older than 30 days, pending, or failed
// before acceptance are left out. Receipts go through engagement_receipt.
func TestReadSpend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewPool(t)
	asOf := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * 24 * time.Hour)})
	const day, never = 24 * time.Hour, time.Duration(-1)
	// add scripts a message accepted sentAgo before asOf (with never, one
	// never accepted, whose status is receipt) through transport (none in the ledger when ""), with what
	// Meta's webhook said of its pricing, and its receipt; the messages
	// are queued in one statement, then their receipts applied in order.
	var sends []fixture.PricingSend
	type receipted struct {
		provider, status, code string
		at                     time.Time
	}
	var receipts []receipted
	add := func(kind, jid, transport string, sentAgo time.Duration, receipt string, billable *bool, category *string) {
		t.Helper()
		s := fixture.PricingSend{ID: fixture.NewID(), Type: kind, JID: jid, Status: "sent", ProviderID: fixture.NewID(),
			Billable: billable, Category: category, Transport: transport}
		if sentAgo != never {
			s.SentAt = asOf.Add(-sentAgo)
		} else {
			s.Status, receipt = receipt, ""
		}
		sends = append(sends, s)
		if receipt != "" {
			code := ""
			if receipt == "failed" {
				code = "131026"
			}
			receipts = append(receipts, receipted{provider: s.ProviderID, status: receipt, code: code, at: s.SentAt.Add(time.Minute)})
		}
	}
	br, us := "5511999990000@s.whatsapp.net", "14155550100@s.whatsapp.net"
	yes, no := fixture.Ptr(true), fixture.Ptr(false)
	utility, marketing := fixture.Ptr("utility"), fixture.Ptr("marketing")
	const cloud = pricing.MetaTransport

	add("goodbye", br, cloud, day, "delivered", yes, marketing)                  // billed: marketing
	add("goodbye", br, cloud, 2*day, "read", no, marketing)                      // delivered, free (Meta: not billable)
	add("weekly_review", br, cloud, 3*day, "", yes, utility)                     // awaiting, utility whatever the kind says
	add("goodbye", br, cloud, 4*day, "", nil, nil)                               // awaiting, the kind's marketing
	add("reminder", br, cloud, 5*day, "delivered", nil, nil)                     // billed: marketing
	add("goodbye", br, cloud, 6*day, "failed", nil, nil)                         // failed after acceptance: not billed
	add("goodbye", br, cloud, 6*day, "failed", yes, marketing)                   // failed late after a billable sent: not billed
	add("goodbye", us, cloud, 7*day, "delivered", nil, nil)                      // billed, a country without prices: unpriced
	add("goodbye", "120363025246125888@g.us", cloud, day, "delivered", nil, nil) // billed, a group: unpriced
	add("goodbye", br, "", 8*day, "delivered", yes, marketing)                   // no ledger row, Meta priced it: billed
	add("goodbye", br, "webhook", day, "delivered", nil, nil)                    // the bot's connection: no Meta cost
	add("goodbye", br, "webhook", day, "failed", nil, nil)                       // the bot's connection: no Meta cost
	add("goodbye", br, "log", day, "", nil, nil)                                 // the log: no Meta cost
	add("goodbye", br, "", day, "delivered", nil, nil)                           // no ledger row, Meta silent: not known
	add("goodbye", br, cloud, 31*day, "delivered", yes, marketing)               // older than 30 days: out
	add("goodbye", br, cloud, never, "pending", nil, nil)                        // never accepted: out
	add("goodbye", br, cloud, never, "failed", nil, nil)                         // failed at the send: out
	add("goodbye", br, cloud, never, "cancelled", nil, nil)                      // cancelled: out
	// Sent after as-of: out.
	add("goodbye", br, cloud, -2*time.Hour, "", nil, nil)
	fixture.PricingSends(t, pool, user, asOf.Add(-40*day), sends...)
	for _, r := range receipts {
		if _, _, err := activity.Receipt(ctx, pool, r.provider, r.status, activity.ReceiptOptions{At: r.at, ErrorCode: r.code}); err != nil {
			t.Fatalf("receipt %s of %s: %v", r.status, r.provider, err)
		}
	}

	s, err := pricing.ReadSpend(ctx, pool, asOf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Accepted != 10 || s.Delivered != 6 || s.Billable != 5 || s.Failed != 2 || s.Awaiting != 2 || s.Unpriced != 2 {
		t.Errorf("totals: %d accepted, %d delivered, %d billed, %d failed, %d awaiting, %d unpriced; want 10, 6, 5, 2, 2, 2",
			s.Accepted, s.Delivered, s.Billable, s.Failed, s.Awaiting, s.Unpriced)
	}
	if len(s.Categories) != 2 {
		t.Fatalf("categories %+v, want marketing and utility", s.Categories)
	}
	m, u := s.Categories[0], s.Categories[1]
	// marketing: billed the delivered goodbye, the reminder, the one Meta
	// priced without a ledger row (3 × 0.0625 = 0.1875), the US and the
	// group ones (unpriced); awaiting the unreceipted goodbye.
	if m.Category != "marketing" || m.Accepted != 9 || m.Delivered != 6 || m.Billable != 5 || m.Failed != 2 || m.Awaiting != 1 ||
		m.Unpriced != 2 || m.USD != 0.1875 || m.AwaitingUSD != 0.0625 {
		t.Errorf("marketing %+v; want 9 accepted, 6 delivered, 5 billed, 2 failed, 1 awaiting, 2 unpriced, US$0.1875, US$0.0625 awaiting", m)
	}
	if u.Category != "utility" || u.Accepted != 1 || u.Awaiting != 1 || u.Billable != 0 || u.USD != 0 || u.AwaitingUSD != 0.0068 {
		t.Errorf("utility %+v; want 1 accepted and awaiting, nothing billed, US$0.0068 if delivered", u)
	}
	if s.USD != 0.1875 || s.AwaitingUSD != 0.0693 || s.Currency != "USD" || s.PricesAsOf != "2026-01-01" || !s.To.Equal(asOf) || !s.From.Equal(asOf.Add(-30*day)) {
		t.Errorf("spend %+v; want US$0.1875 (US$0.0693 awaiting) over the 30 days to %s at the defaults' prices", s, asOf)
	}
	want := []pricing.TransportMessages{{Transport: "", Messages: 1, Delivered: 1}, {Transport: "log", Messages: 1},
		{Transport: "webhook", Messages: 2, Delivered: 1}}
	if !slices.Equal(s.NotMeta, want) || s.NotMetaMessages() != 4 {
		t.Errorf("not Meta's: %+v; want %+v", s.NotMeta, want)
	}

	// Priced in the US too, the two become one priced.
	p := pricing.Default()
	p.Countries["US"] = pricing.Country{CallingCode: "1", Prices: p.Countries["BR"].Prices}
	if s, err = pricing.ReadSpend(ctx, pool, asOf, p); err != nil {
		t.Fatal(err)
	}
	if s.Unpriced != 1 || s.USD != 0.25 {
		t.Errorf("with US prices: %d unpriced, US$%v; want 1 (the group), US$0.25", s.Unpriced, s.USD)
	}

	// Nothing accepted: zeros, and categories and not_meta [] rather than null.
	if s, err = pricing.ReadSpend(ctx, pool, asOf.Add(-100*day), nil); err != nil || s.Accepted != 0 || s.Categories == nil || s.NotMeta == nil {
		t.Errorf("an empty window: %+v, %v", s, err)
	}
}
