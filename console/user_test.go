package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
)

// TestUserPageShowsRemindAtOnlyWhenRemindLater: issue 41 found a stale
// remind_at shown for a goodbye_sent user (the bot leaves the column when
// the user moves on). It is a timer of remind_later only.
func TestUserPageShowsRemindAtOnlyWhenRemindLater(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	srv, _ := serveLogged(t, pool)
	now := time.Now().UTC().Truncate(time.Second)
	stale := time.Date(2026, 3, 14, 9, 26, 0, 0, time.UTC)
	goodbye := fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: now.Add(-20 * 24 * time.Hour),
		GoodbyeSentAt: fixture.Ptr(now.Add(-time.Hour)), GoodbyeExpiresAt: fixture.Ptr(now.Add(47 * time.Hour)), RemindAt: &stale})
	later := fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: now.Add(-20 * 24 * time.Hour), RemindAt: &stale})

	for _, tc := range []struct {
		id   string
		show bool
	}{{goodbye, false}, {later, true}} {
		var u console.User
		resp, body := get(t, srv, "/users?id="+tc.id, viewer, viewerPassword, true)
		decode(t, body, &u)
		if resp.StatusCode != http.StatusOK || u.State == nil {
			t.Fatalf("user %s: %d %s", tc.id, resp.StatusCode, body)
		}
		if shown := u.State.RemindAt != nil; shown != tc.show {
			t.Errorf("%s user: remind_at %v in the JSON, want shown %v", u.State.State, u.State.RemindAt, tc.show)
		}
		_, page := get(t, srv, "/users?id="+tc.id, viewer, viewerPassword, false)
		if shown := strings.Contains(page, "2026-03-14 09:26"); shown != tc.show {
			t.Errorf("%s user: remind at 2026-03-14 09:26 on the page: %v, want %v", u.State.State, shown, tc.show)
		}
	}
}
