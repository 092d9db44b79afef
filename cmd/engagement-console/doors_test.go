package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 56, findings 3 and 4, through the console's door: POST
// /api/messages of a custom type to an opted-out user, of anything to an
// erased one, of a goodbye to a user held out of the current cycle (by the
// shipped engagement-daily), and of an opt-out's confirmation, answer 409
// naming the reason, and write nothing. On the code before, each was
// queued (201).
func TestTheAPIRefusesWhatNoDoorMaySend(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	now := fixture.Now(t, pool)
	optedOut := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-time.Hour), OptedOut: true})
	erased := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-time.Hour)})
	heldOut := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-15 * 24 * time.Hour)})
	fine := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-time.Hour)})
	env := cmdtest.Env("DATABASE_URL="+url, "USER=ana")
	if res := cmdtest.Run(t, cmdtest.Build(t, "./cmd/engagement-daily"), env, "--holdout-percent", "100"); res.Code != 0 {
		t.Fatalf("engagement-daily: exit %d: %s", res.Code, res.Stderr)
	}
	if res := cmdtest.Run(t, cmdtest.Build(t, "./cmd/engagementctl"), env, "erase", "--user-id", erased, "--yes"); res.Code != 0 {
		t.Fatalf("erase: exit %d: %s", res.Code, res.Stderr)
	}
	c := startConsole(t, cmdtest.Build(t, "./cmd/engagement-console"), url)

	for _, tc := range []struct {
		name, user, typ, key string
		status               int
		reason               string
	}{
		{"custom_news to the opted-out user", optedOut, "custom_news", "engagement.weekly_review.celebration", http.StatusConflict, "opted_out"},
		{"support_followup to the erased user", erased, "support_followup", "engagement.weekly_review.celebration", http.StatusConflict, "erased"},
		{"a goodbye to the held-out user", heldOut, "goodbye", "engagement.goodbye.self_select", http.StatusConflict, "holdout"},
		{"a confirmation with the goodbye's text", optedOut, "opt_out_confirmation", "engagement.goodbye.self_select",
			http.StatusConflict, "confirmation_without_opt_out"},
		{"custom_news to a user who said nothing", fine, "custom_news", "engagement.weekly_review.celebration", http.StatusCreated, ""},
	} {
		status, answer := c.api(t, fmt.Sprintf(`{"user_id":%q,"type":%q,"key":%q,"params":{"count":"2"}}`, tc.user, tc.typ, tc.key))
		var got struct {
			ID     string `json:"id"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(answer), &got); err != nil || status != tc.status || got.Reason != tc.reason {
			t.Errorf("%s: %d %s; want %d with reason %q", tc.name, status, answer, tc.status, tc.reason)
		}
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Users: []string{optedOut, erased, heldOut}, Status: "pending"}); n != 0 {
		t.Errorf("%d messages queued for the users who may get none, want 0", n)
	}
}
