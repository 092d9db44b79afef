package ctl

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/engagement-scheduler/engagement/pricing"
)

// writeSpend writes what Meta bills for the window's messages (status and
// funnel print it alike): the US$ of the delivered ones Meta bills, how
// the Cloud API's accepted messages stand (delivered, billed, failed,
// awaiting a receipt), by category, and the messages other transports
// sent, which cost Meta nothing.
func writeSpend(w io.Writer, s pricing.Spend) error {
	fmt.Fprintf(w, "spend, last %s: %s billed by Meta (list prices as of %s)\n", s.Window, usd(s.USD), s.PricesAsOf)
	if s.Accepted == 0 {
		fmt.Fprintln(w, "  Meta's Cloud API accepted nothing")
	} else {
		fmt.Fprintf(w, "  Meta's Cloud API accepted %d: %d delivered, %d billed, %d failed (not billed), %d awaiting a receipt (%s if delivered)\n",
			s.Accepted, s.Delivered, s.Billable, s.Failed, s.Awaiting, usd(s.AwaitingUSD))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  category\taccepted\tdelivered\tbilled\tfailed\tawaiting\tnot priced\tUS$\t")
		for _, c := range s.Categories {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", c.Category, c.Accepted, c.Delivered, c.Billable, c.Failed, c.Awaiting, c.Unpriced, usd(c.USD))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if s.Unpriced > 0 {
			fmt.Fprintf(w, "  not priced: %d billed, no price for their country or category (not in the US$)\n", s.Unpriced)
		}
	}
	if len(s.NotMeta) > 0 {
		parts := make([]string, 0, len(s.NotMeta))
		for _, t := range s.NotMeta {
			name := t.Transport
			if name == "" {
				name = "a transport not recorded"
			}
			parts = append(parts, fmt.Sprintf("%d through %s", t.Messages, name))
		}
		fmt.Fprintf(w, "  no Meta cost: %s (not Meta's Cloud API)\n", strings.Join(parts, ", "))
	}
	if h := s.HeldOut; h.Goodbyes > 0 {
		saved := "not priced"
		if h.USD != nil {
			saved = usd(*h.USD) + " saved"
		}
		fmt.Fprintf(w, "  held out: %d goodbyes not sent, %s\n", h.Goodbyes, saved)
	}
	return nil
}

// usd writes dollars as the console does: cents, or four decimals under
// a cent, whole dollars from 100.
func usd(f float64) string {
	switch {
	case f >= 100:
		return fmt.Sprintf("US$%d", int64(math.Round(f)))
	case f == 0 || f >= 0.01:
		return fmt.Sprintf("US$%.2f", f)
	}
	return fmt.Sprintf("US$%.4f", f)
}
