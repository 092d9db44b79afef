package pricing_test

import (
	"context"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/pricing"
)

// The spend of the last 30 days on a real database: Meta's pricing where
// it came, else the kind's category and the receipts; an unknown country
// counted unpriced; late failures not billed unless Meta said; messages
// older than 30 days, pending or failed before acceptance left out.
func TestReadSpend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewPool(t)
	asOf := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * 24 * time.Hour)})
	n := 0
	add := func(kind, jid, status string, sentAgo time.Duration, delivered bool, billable *bool, category *string) {
		t.Helper()
		n++
		var sentAt, deliveredAt *time.Time
		if sentAgo >= 0 {
			s := asOf.Add(-sentAgo)
			sentAt = &s
			if delivered {
				d := s.Add(time.Minute)
				deliveredAt = &d
			}
		}
		fixture.Exec(t, pool, `
			INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
			       destination_jid, scheduled_for, idempotency_key, status, sent_at, delivered_at, billable, pricing_category)
			VALUES ($1, $2, 'k', '{}', 'individual', $3, $4, $5, $6, $7, $8, $9, $10)`,
			user, kind, jid, asOf.Add(-40*24*time.Hour), fixture.NewID(), status, sentAt, deliveredAt, billable, category)
	}
	br, us := "5511999990000@s.whatsapp.net", "14155550100@s.whatsapp.net"
	yes, no := fixture.Ptr(true), fixture.Ptr(false)
	utility, marketing := fixture.Ptr("utility"), fixture.Ptr("marketing")
	const day = 24 * time.Hour

	add("goodbye", br, "sent", day, true, yes, marketing)                  // Meta: billable marketing
	add("goodbye", br, "sent", 2*day, true, no, marketing)                 // Meta: free (e.g. inside a free entry point)
	add("weekly_review", br, "sent", 3*day, false, yes, utility)           // Meta: billable utility, whatever the kind says
	add("goodbye", br, "sent", 4*day, false, nil, nil)                     // no receipt: accepted, billed as the kind's marketing
	add("reminder", br, "sent", 5*day, true, nil, nil)                     // delivered by receipt: billed, marketing
	add("goodbye", br, "failed", 6*day, false, nil, nil)                   // failed after acceptance, Meta silent: not billed
	add("goodbye", br, "failed", 6*day, false, yes, marketing)             // failed late but Meta says billable: billed
	add("goodbye", us, "sent", 7*day, true, nil, nil)                      // a country without prices: unpriced
	add("goodbye", "120363025246125888@g.us", "sent", day, true, nil, nil) // a group: unpriced
	add("goodbye", br, "sent", 31*day, true, yes, marketing)               // older than 30 days: out
	add("goodbye", br, "sent", -2*time.Hour, false, nil, nil)              // sent after as-of: out
	add("goodbye", br, "pending", -1, false, nil, nil)                     // never accepted: out
	add("goodbye", br, "failed", -1, false, nil, nil)                      // failed at the send: out
	add("goodbye", br, "cancelled", -1, false, nil, nil)                   // cancelled: out

	s, err := pricing.ReadSpend(ctx, pool, asOf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Accepted != 9 || s.Billable != 7 || s.Unpriced != 2 {
		t.Errorf("totals: %d accepted, %d billable, %d unpriced; want 9, 7, 2", s.Accepted, s.Billable, s.Unpriced)
	}
	if len(s.Categories) != 2 {
		t.Fatalf("categories %+v, want marketing and utility", s.Categories)
	}
	m, u := s.Categories[0], s.Categories[1]
	// marketing: billable the Meta-billable goodbye, the unreceipted one,
	// the reminder, the late failure Meta billed (4 × 0.0625 = 0.25), and
	// the US and the group ones (unpriced).
	if m.Category != "marketing" || m.Accepted != 8 || m.Billable != 6 || m.Unpriced != 2 || m.USD != 0.25 {
		t.Errorf("marketing %+v; want 8 accepted, 6 billable, 2 unpriced, US$0.25", m)
	}
	if u.Category != "utility" || u.Accepted != 1 || u.Billable != 1 || u.Unpriced != 0 || u.USD != 0.0068 {
		t.Errorf("utility %+v; want 1 accepted and billable, US$0.0068", u)
	}
	if s.USD != 0.2568 || s.Currency != "USD" || s.PricesAsOf != "2026-01-01" || !s.To.Equal(asOf) || !s.From.Equal(asOf.Add(-30*day)) {
		t.Errorf("spend %+v; want US$0.2568 over the 30 days to %s at the defaults' prices", s, asOf)
	}

	// Priced in the US too, the two become one priced.
	p := pricing.Default()
	p.Countries["US"] = pricing.Country{CallingCode: "1", Prices: p.Countries["BR"].Prices}
	if s, err = pricing.ReadSpend(ctx, pool, asOf, p); err != nil {
		t.Fatal(err)
	}
	if s.Unpriced != 1 || s.USD != 0.3193 {
		t.Errorf("with US prices: %d unpriced, US$%v; want 1 (the group), US$0.3193", s.Unpriced, s.USD)
	}

	// Nothing accepted: zeros, and categories [] rather than null.
	if s, err = pricing.ReadSpend(ctx, pool, asOf.Add(-100*day), nil); err != nil || s.Accepted != 0 || s.Categories == nil {
		t.Errorf("an empty window: %+v, %v", s, err)
	}
}
