package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// Issue 55, finding 6: the user page says why a user's next goodbye waits
// after goodbyes that failed for good. Two users' goodbyes, queued by the
// real daily job ten days ago, are accepted and fail through
// engagement_receipt, one with 131049 (Meta's per-user marketing limit),
// one with 131026 (undeliverable); the next day's run moves them back to
// active. The page shows the next goodbye 2 and 7 days after the failed
// one, the code and what it means; a user with no failed goodbye shows
// nothing of it.
func TestUserPageExplainsTheGoodbyeBackoff(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	srv, _ := serveLogged(t, pool)
	queuedAt := time.Now().UTC().Truncate(time.Second).Add(-10 * 24 * time.Hour)
	limited := fixture.User(t, pool, fixture.UserOptions{LastActivity: queuedAt.Add(-20 * 24 * time.Hour)})
	undeliverable := fixture.User(t, pool, fixture.UserOptions{LastActivity: queuedAt.Add(-20 * 24 * time.Hour)})
	quiet := fixture.User(t, pool, fixture.UserOptions{LastActivity: queuedAt.Add(-time.Hour)})
	failGoodbyes(t, pool, queuedAt, map[string]string{limited: "131049", undeliverable: "131026"})

	for _, tc := range []struct {
		user, code string
		until      time.Time
		words      string
	}{
		{limited, "131049", queuedAt.Add(2 * 24 * time.Hour), "Meta&#39;s limit on marketing messages"},
		{undeliverable, "131026", queuedAt.Add(7 * 24 * time.Hour), "undeliverable"},
	} {
		var u console.User
		resp, body := get(t, srv, "/users?id="+tc.user, viewer, viewerPassword, true)
		decode(t, body, &u)
		if resp.StatusCode != http.StatusOK || u.State == nil || u.State.GoodbyeBackoff == nil {
			t.Fatalf("user %s: %d, no goodbye backoff in %s", tc.code, resp.StatusCode, body)
		}
		b := u.State.GoodbyeBackoff
		if b.Failures != 1 || b.Code != tc.code || b.Until == nil || !b.Until.Equal(tc.until) || b.UntilTheyWrite {
			t.Errorf("user %s's backoff %+v, want 1 failure, code %s, next goodbye at %s", tc.code, b, tc.code, tc.until)
		}
		_, page := get(t, srv, "/users?id="+tc.user, viewer, viewerPassword, false)
		for _, want := range []string{`id="goodbye-backoff"`, "WhatsApp error " + tc.code, tc.words,
			tc.until.Format("2006-01-02 15:04")} {
			if !strings.Contains(page, want) {
				t.Errorf("user %s's page lacks %q", tc.code, want)
			}
		}
	}
	var u console.User
	_, body := get(t, srv, "/users?id="+quiet, viewer, viewerPassword, true)
	decode(t, body, &u)
	if u.State == nil || u.State.GoodbyeBackoff != nil {
		t.Errorf("a user with no failed goodbye: backoff %+v, want none", u.State)
	}
}

// failGoodbyes runs the real daily job at queuedAt, has every goodbye
// it queued accepted and then fail through engagement_receipt with its
// user's code in codes, and runs the job the next day: the users are back
// to active, their next goodbye waiting by the code.
func failGoodbyes(t *testing.T, pool *pgxpool.Pool, queuedAt time.Time, codes map[string]string) {
	t.Helper()
	ctx := context.Background()
	run := func(at time.Time) {
		t.Helper()
		if _, err := scheduler.RunDaily(ctx, pool, scheduler.Config{AsOf: at, Logger: zerolog.Nop()}); err != nil {
			t.Fatal(err)
		}
	}
	run(queuedAt)
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Type: "goodbye"}) {
		fixture.SetMessages(t, pool, fixture.MessageChange{ID: m.ID, SetStatus: "sent", SentAt: queuedAt.Add(time.Minute),
			ProviderID: "wamid." + m.UserID})
	}
	for user, code := range codes {
		if _, _, err := activity.Receipt(ctx, pool, "wamid."+user, activity.ReceiptFailed,
			activity.ReceiptOptions{At: queuedAt.Add(2 * time.Minute), ErrorCode: code}); err != nil {
			t.Fatal(err)
		}
	}
	run(queuedAt.Add(24 * time.Hour))
}

// The same user page in Chromium: the 131049 user's card and sentence as a
// person sees them (docs/console/user-backoff.png).
func TestGoodbyeBackoffInTheBrowser(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	srv, _ := serveLogged(t, pool)
	queuedAt := time.Now().UTC().Truncate(time.Second).Add(-10 * 24 * time.Hour)
	limited := fixture.User(t, pool, fixture.UserOptions{LastActivity: queuedAt.Add(-20 * 24 * time.Hour)})
	failGoodbyes(t, pool, queuedAt, map[string]string{limited: "131049"})
	ctx := browse(t, operator, operatorPassword)
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/users?id="+limited), chromedp.WaitVisible("#goodbye-backoff"))
	text, err := chromedp.Run(ctx, chromedp.Text("main"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"WhatsApp error 131049", queuedAt.Add(2 * 24 * time.Hour).Format("2006-01-02 15:04"), "Timeline"} {
		if !strings.Contains(text, want) {
			t.Errorf("the user page in the browser does not show %q", want)
		}
	}
	browsertest.Shot(t, ctx, "user-backoff.png")
	browsertest.RequireNoErrors(t, ctx)
}
