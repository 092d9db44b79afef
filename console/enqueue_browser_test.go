package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
)

// waitResult waits until the Enqueue form's result says state (created,
// replayed or refused) for the submit numbered n, and returns its text.
func waitResult(t *testing.T, ctx context.Context, state string) string {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, browsertest.Timeout)
	defer cancel()
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](`(() => {
		const r = document.getElementById('enqueue-result');
		return !r.hidden && r.dataset.state === '`+state+`' && !document.querySelector('#enqueue button').disabled;
	})()`)); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('enqueue-result').dataset.state + ': ' + document.getElementById('enqueue-result').textContent`))
		t.Fatalf("the Enqueue result never said %s (%q): %v; page errors: %v", state, got, err, browsertest.Errors(ctx))
	}
	text, err := chromedp.Run(ctx, chromedp.Text("#enqueue-result"))
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// TestFindAndEnqueueInTheBrowser: an operator finds a user by the phone
// number a support request gives, and queues a message from the user's
// page: the form sends JSON to POST /api/messages and shows the answer,
// a new message, a replay of its key, a refusal. Through the pool the
// binary opens.
func TestFindAndEnqueueInTheBrowser(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	srv, _ := serveLogged(t, pool)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now().Add(-3 * 24 * time.Hour),
		WhatsAppJID: fixture.Ptr("5511912345678@s.whatsapp.net")})
	group := "120363025246125888@g.us"
	for range 2 {
		fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), Destination: "group", GroupJID: &group})
	}
	ctx := browse(t, operator, operatorPassword)

	// Several matches: a list.
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/users"), chromedp.WaitVisible("form#find"),
		chromedp.SendKeys(`form#find input[name=q]`, group), chromedp.Click(`form#find button`),
		chromedp.WaitVisible("table.matches"))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('table.matches tbody tr').length`)); err != nil || n != 2 {
		t.Errorf("the group's JID lists %d users (%v), want 2", n, err)
	}
	browsertest.Shot(t, ctx, "user-matches.png")

	// The phone number as a support request writes it: the user's page.
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/users"), chromedp.WaitVisible("form#find"),
		chromedp.SendKeys(`form#find input[name=q]`, "+55 11 91234-5678"), chromedp.Click(`form#find button`),
		chromedp.WaitVisible("form#enqueue"))
	if path, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname + location.search`)); err != nil || path != "/users" {
		t.Errorf("after the search the address is %q (%v), want /users: the number stays out of it", path, err)
	}

	browsertest.Run(t, ctx,
		chromedp.SendKeys(`#enqueue input[name=type]`, "weekly_review"),
		chromedp.SetValue(`#enqueue textarea[name=params]`, `{"count":"3"}`),
		chromedp.SendKeys(`#enqueue input[name=idempotency_key]`, "support-77"),
		chromedp.SendKeys(`#enqueue input[name=reason]`, "asked for by support, ticket 77"),
		chromedp.Click(`#enqueue button[type=submit]`))
	text := waitResult(t, ctx, "created")
	msgs := fixture.MessagesOf(t, pool, user)
	if len(msgs) != 1 || !strings.Contains(text, msgs[0].ID) || !strings.Contains(text, "Queued") {
		t.Fatalf("after Enqueue the page says %q and the queue holds %+v; want one message, named", text, msgs)
	}
	if n := fixture.Audits(t, pool, func(e fixture.AuditEntry) bool {
		return e.Action == "enqueue" && fixture.Is(e.Reason, "asked for by support, ticket 77") && e.Is("message_id", msgs[0].ID)
	}); n != 1 {
		t.Errorf("%d audit rows for the message with its reason, want 1", n)
	}
	browsertest.Shot(t, ctx, "user-enqueue.png")

	// The same key again: the same message, nothing new.
	browsertest.Run(t, ctx, chromedp.Click(`#enqueue button[type=submit]`))
	if text := waitResult(t, ctx, "replayed"); !strings.Contains(text, msgs[0].ID) || !strings.Contains(text, "Nothing was changed") {
		t.Errorf("a replay says %q, want the same message and nothing changed", text)
	}
	// A refusal shows the API's reason.
	browsertest.ExpectStatus(ctx, "/api/messages", http.StatusBadRequest)
	browsertest.Run(t, ctx, chromedp.SendKeys(`#enqueue input[name=scheduled_for]`, "tomorrow"),
		chromedp.Click(`#enqueue button[type=submit]`))
	if text := waitResult(t, ctx, "refused"); !strings.Contains(text, "400") || !strings.Contains(text, "scheduled_for") {
		t.Errorf("a bad schedule says %q, want the 400 and the field", text)
	}
	if n := len(fixture.MessagesOf(t, pool, user)); n != 1 {
		t.Errorf("%d messages after a replay and a refusal, want 1", n)
	}
	// Issue 56: the user opts out; a custom type is marketing, and the
	// page shows the rule of every door's refusal, naming the reason.
	fixture.SetConsent(t, pool, fixture.ConsentChange{User: user, OptedOut: true, Source: "bot:keyword"})
	browsertest.ExpectStatus(ctx, "/api/messages", http.StatusConflict)
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/users?id="+user), chromedp.WaitVisible("form#enqueue"))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const f = document.getElementById('enqueue');
		f.elements.scheduled_for.value = '';
		f.elements.type.value = 'promo';
		f.elements.key.value = 'engagement.weekly_review.celebration';
		f.elements.params.value = '{"count":"3"}';
		f.elements.idempotency_key.value = 'support-78';
		return f.elements.type.value;
	})()`)); err != nil {
		t.Fatal(err)
	}
	browsertest.Run(t, ctx, chromedp.Click(`#enqueue button[type=submit]`))
	if text := waitResult(t, ctx, "refused"); !strings.Contains(text, "409") || !strings.Contains(text, "opted_out") {
		t.Errorf("a promo to an opted-out user says %q, want the 409 and opted_out", text)
	}
	browsertest.Shot(t, ctx, "user-enqueue-refused.png")
	if n := len(fixture.MessagesOf(t, pool, user)); n != 1 {
		t.Errorf("%d messages after the refusal, want 1", n)
	}
	browsertest.RequireNoErrors(t, ctx)

	// A viewer gets no form.
	if _, page := get(t, srv, "/users?id="+user, viewer, viewerPassword, false); strings.Contains(page, `id="enqueue"`) {
		t.Error("a viewer's user page has the Enqueue form")
	}
}
