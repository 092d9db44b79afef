package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/verify"
)

// Issue 55, finding 6: late failures were retried blindly. A goodbye
// WhatsApp accepted and then failed sent its user back to active, and a
// new goodbye went out the day after: a goodbye every other day, all
// failing. Here the daily job runs every day for 68 days (--as-of, in the
// past), each goodbye it queues is accepted (sent, with a provider id) and
// fails through the real engagement_receipt, with a code per user:
//
//   - 131026 (undeliverable): goodbyes 7, 14 and 28 days apart, then none;
//     the user writes on day 52 and gets one 14 days later (day 66);
//   - 131049 (Meta's per-user marketing limit): 2, 4, 8 and 16 days apart,
//     then none;
//   - a code the scheduler does not know: as 131026;
//   - 131050 (the user stopped marketing messages): opted out, back to
//     active the next day, never dormant, never another goodbye.
//
// Before, each of the first three got a goodbye every two days (34 in 68
// days) and the 131050 user went dormant. verify passes along the way and
// counts the users the backoff holds back as exempt.
func TestLateFailuresBackOffByCode(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	ctx := context.Background()
	now := fixture.Now(t, pool)
	start := now.UTC().Truncate(24 * time.Hour).Add(-70*24*time.Hour + 6*time.Hour)
	day := func(d int) time.Time { return start.Add(time.Duration(d) * 24 * time.Hour) }
	silent := start.Add(-20 * 24 * time.Hour)
	codes := map[string]string{}
	user := func(code string) string {
		u := fixture.User(t, pool, fixture.UserOptions{LastActivity: silent})
		codes[u] = code
		return u
	}
	undeliverable, limited, unknown, stopped := user("131026"), user("131049"), user("999999"), user("131050")
	env := cmdtest.Env("DATABASE_URL=" + url)

	const days = 68
	writesOn := 52
	for d := 0; d < days; d++ {
		asOf := day(d)
		if d == writesOn {
			if _, err := activity.Fire(ctx, pool, undeliverable, sm.UserMessage, activity.FireOptions{At: asOf.Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		res := cmdtest.Exec(t, jobcmd.NewDailyCommand, env, "--as-of", asOf.Format(time.RFC3339), "--output", "json")
		if res.Code != 0 {
			t.Fatalf("engagement-daily --as-of %s: exit %d: %s", asOf, res.Code, res.Stderr)
		}
		acceptAndFail(t, pool, asOf, codes)
		if d%7 == 6 || d == days-1 {
			if v := cmdtest.Exec(t, ctl.NewCommand, env, "verify", "--as-of", asOf.Format(time.RFC3339)); v.Code != 0 {
				t.Errorf("verify --as-of %s (day %d): exit %d: %s%s", asOf, d, v.Code, v.Stdout, v.Stderr)
			}
		}
	}

	for _, tc := range []struct {
		name string
		user string
		want []int // the days a goodbye was queued
	}{
		{"131026, then the user writes on day 52", undeliverable, []int{0, 7, 21, 49, 66}},
		{"131049", limited, []int{0, 2, 6, 14, 30}},
		{"an unknown code", unknown, []int{0, 7, 21, 49}},
		{"131050", stopped, []int{0}},
	} {
		if got := goodbyeDays(t, pool, tc.user, start); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: goodbyes on days %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := fixture.StateOf(t, pool, stopped).State; got != "active" {
		t.Errorf("the 131050 user is %s, want active: a goodbye that never arrived times nobody out", got)
	}
	if n := fixture.CountTransitions(t, pool, fixture.Moves{Users: []string{stopped}, ToState: "dormant"}); n != 0 {
		t.Errorf("the 131050 user went dormant %d times, want never", n)
	}
	if got := lastTrigger(t, pool, stopped); got != "goodbye_undelivered" {
		t.Errorf("the 131050 user last moved by %q, want goodbye_undelivered", got)
	}
	// The users the backoff holds back (past the schedules' end) are
	// verify's exempt, not its violations.
	v := cmdtest.Exec(t, ctl.NewCommand, env, "verify", "--as-of", day(days-1).Format(time.RFC3339), "--output", "json")
	var rep verify.Report
	if err := json.Unmarshal([]byte(v.Stdout), &rep); err != nil || v.Code != 0 {
		t.Fatalf("verify at the end: exit %d, %v: %s%s", v.Code, err, v.Stdout, v.Stderr)
	}
	for _, c := range rep.Checks {
		if c.Name == verify.CheckNoUserStuck && (c.Violations != 0 || c.Exempt != 2) {
			t.Errorf("verify's %s at the end: %d violations, %d exempt; want 0 and 2 (131049 and the unknown code, "+
				"held until they write)", c.Name, c.Violations, c.Exempt)
		}
	}
}

// acceptAndFail plays WhatsApp for the goodbyes the run as of asOf queued:
// each is accepted (sent a minute after the run, with a provider id, as
// queue-process records it), then fails a minute later through
// engagement_receipt with its user's code.
func acceptAndFail(t *testing.T, pool *pgxpool.Pool, asOf time.Time, codes map[string]string) {
	t.Helper()
	ctx := context.Background()
	for _, s := range fixture.AcceptPendingGoodbyes(t, pool, asOf.Add(time.Minute)) {
		if _, _, err := activity.Receipt(ctx, pool, fixture.Deref(s.ProviderMessageID), activity.ReceiptFailed,
			activity.ReceiptOptions{At: asOf.Add(2 * time.Minute), ErrorCode: codes[s.UserID]}); err != nil {
			t.Fatal(err)
		}
	}
}

// goodbyeDays are the days after start on which user's goodbyes were
// queued, by their keys' UTC days.
func goodbyeDays(t *testing.T, pool *pgxpool.Pool, user string, start time.Time) []int {
	t.Helper()
	var out []int
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Users: []string{user}, Type: "goodbye"}) {
		if m.PeriodStart == nil {
			t.Fatalf("goodbye %s has no period_start", m.ID)
		}
		out = append(out, int(m.PeriodStart.Sub(start.Truncate(24*time.Hour)).Hours()/24))
	}
	slices.Sort(out)
	return out
}
