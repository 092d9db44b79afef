package main_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// TestConfirmInTheBrowser is an operator in Chromium on the shipped
// console: the failure group's Requeue…, its preview and Confirm; then a
// cancel from the queue page's form, previewed and confirmed. Each
// confirmation page says what was done, and the audit page lists both.
func TestConfirmInTheBrowser(t *testing.T) {
	bin := cmdtest.Build(t, "./cmd/engagement-console")
	url := pgtest.NewDatabase(t)
	failed, pending := seedQueue(t, url)
	c := startConsole(t, bin, url)

	ctx := browsertest.New(t)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:"+opsPassword))
	browsertest.Run(t, ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{"Authorization": auth},
		})
		return err
	}))
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}

	browsertest.Run(t, ctx,
		chromedp.Navigate(c.base+"/queue"),
		chromedp.WaitVisible("table.failures"),
		chromedp.Click(`table.failures tbody tr:first-child button`),
		chromedp.WaitVisible("form#confirm"),
	)
	if lead := text("p.lead"); !strings.Contains(lead, "Requeue 2 messages") {
		t.Fatalf("the requeue preview says %q, want 2 messages", lead)
	}
	browsertest.Run(t, ctx, chromedp.Click(`form#confirm button[type=submit]`), chromedp.WaitVisible("#done"))
	if done := text("#done"); !strings.Contains(done, "Requeued 2 messages") {
		t.Errorf("after the requeue's Confirm the page says %q", done)
	}
	browsertest.Shot(t, ctx, "binary-requeue-done.png")

	browsertest.Run(t, ctx,
		chromedp.Navigate(c.base+"/queue"),
		chromedp.WaitVisible(`form[action="/actions/cancel/preview"]`),
		chromedp.SetValue(`form[action="/actions/cancel/preview"] select[name=kind]`, "weekly_review"),
		chromedp.Click(`form[action="/actions/cancel/preview"] button[type=submit]`),
		chromedp.WaitVisible("form#confirm"),
	)
	if lead := text("p.lead"); !strings.Contains(lead, "Cancel 2 messages") {
		t.Fatalf("the cancel preview says %q, want 2 messages", lead)
	}
	browsertest.Run(t, ctx, chromedp.Click(`form#confirm button[type=submit]`), chromedp.WaitVisible("#done"))
	if done := text("#done"); !strings.Contains(done, "Cancelled 2 messages") {
		t.Errorf("after the cancel's Confirm the page says %q", done)
	}
	browsertest.Shot(t, ctx, "binary-cancel-done.png")

	browsertest.Run(t, ctx, chromedp.Navigate(c.base+"/audit"), chromedp.WaitVisible("table.audit"))
	if rows := text("table.audit tbody"); !strings.Contains(rows, "requeue") || !strings.Contains(rows, "cancel") {
		t.Errorf("the audit page lists %q, want the requeue and the cancel", rows)
	}
	browsertest.Shot(t, ctx, "binary-audit.png")
	browsertest.RequireNoErrors(t, ctx)

	statuses := queueStatuses(t, url)
	for _, id := range failed {
		if statuses[id] != "pending" {
			t.Errorf("requeued message %s is %q, want pending", id, statuses[id])
		}
	}
	for _, id := range pending {
		if statuses[id] != "cancelled" {
			t.Errorf("cancelled message %s is %q, want cancelled", id, statuses[id])
		}
	}
}
