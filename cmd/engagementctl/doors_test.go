package main_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 56, findings 3 and 4: engagementctl enqueue is a door like any
// other. A custom type is marketing unless declared otherwise, so it never
// goes to a user who opted out; nothing goes to an erased user; a goodbye
// never goes to a user the daily job held out of the current cycle (the
// shipped engagement-daily holds them out); an opt-out's confirmation is
// queued by engagement_opt_out alone. Each refusal exits 2, names its
// reason and writes nothing. On the code before, every one was queued
// (and sent: queue-process never checked a custom type).
func TestEnqueueHoldsEveryMessageToTheRuleOfEveryDoor(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	ctx := context.Background()
	now := fixture.Now(t, pool)
	optedOut := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-time.Hour), OptedOut: true})
	fine := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-time.Hour)})
	erased := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-time.Hour)})
	heldOut := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-15 * 24 * time.Hour)})

	// The daily job holds out everyone it sends a goodbye to (100 %).
	daily := cmdtest.Build(t, "./cmd/engagement-daily")
	env := cmdtest.Env("DATABASE_URL="+url, "USER=ana")
	if res := cmdtest.Run(t, daily, env, "--holdout-percent", "100"); res.Code != 0 {
		t.Fatalf("engagement-daily: exit %d: %s", res.Code, res.Stderr)
	}
	if st := fixture.StateOf(t, pool, heldOut); st.State != "goodbye_sent" {
		t.Fatalf("the held-out user is %s, want goodbye_sent", st.State)
	}
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "erase", "--user-id", erased, "--yes"); res.Code != 0 {
		t.Fatalf("erase: exit %d: %s", res.Code, res.Stderr)
	}
	day := now.UTC().Truncate(24 * time.Hour).Format(time.RFC3339)

	steps := []struct {
		name   string
		args   []string
		code   int
		reason string
	}{
		{"a custom type to an opted-out user", []string{"--user-id", optedOut, "--type", "promo", "--key", "promo.black_friday"}, 2, "opted_out"},
		{"another one", []string{"--user-id", optedOut, "--type", "custom_news", "--key", "news.week"}, 2, "opted_out"},
		{"the same to a user who did not opt out", []string{"--user-id", fine, "--type", "promo", "--key", "promo.black_friday"}, 0, ""},
		{"a confirmation carrying the goodbye's text", []string{"--user-id", optedOut, "--type", "opt_out_confirmation",
			"--key", "engagement.goodbye.self_select"}, 2, "confirmation_without_opt_out"},
		{"a confirmation to a user who did not opt out", []string{"--user-id", fine, "--type", "opt_out_confirmation"}, 2,
			"confirmation_without_opt_out"},
		{"a goodbye to the held-out user", []string{"--user-id", heldOut, "--type", "goodbye"}, 2, "holdout"},
		{"the same, for the cycle's day", []string{"--user-id", heldOut, "--type", "goodbye", "--period-start", day,
			"--idempotency-key", heldOut + ":goodbye_sent:manual"}, 2, "holdout"},
		{"a weekly review to the held-out user", []string{"--user-id", heldOut, "--type", "weekly_review"}, 0, ""},
		{"a support follow-up to the opted-out user, undeclared", []string{"--user-id", optedOut, "--type", "support_followup",
			"--key", "support.followup"}, 2, "opted_out"},
		{"a support follow-up to the erased user, undeclared", []string{"--user-id", erased, "--type", "support_followup",
			"--key", "support.followup"}, 2, "erased"},
	}
	run := func(args ...string) cmdtest.Result {
		return cmdtest.Exec(t, ctl.NewCommand, env, append([]string{"enqueue"}, args...)...)
	}
	for _, s := range steps {
		res := run(s.args...)
		if res.Code != s.code || !strings.Contains(res.Stderr, s.reason) {
			t.Errorf("%s: exit %d, %q; want %d naming %q", s.name, res.Code, res.Stderr, s.code, s.reason)
		}
		if s.code == 2 && len(cmdtest.Lines(res.Stderr)) != 1 {
			t.Errorf("%s: %d lines on stderr, want one: %q", s.name, len(cmdtest.Lines(res.Stderr)), res.Stderr)
		}
	}

	// Declared utility, the follow-up may go to the opted-out user, never
	// to the erased one; a shipped kind's category is not the operator's.
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "categories", "set", "support_followup", "utility"); res.Code != 0 {
		t.Fatalf("categories set: exit %d: %s", res.Code, res.Stderr)
	}
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "categories", "set", "goodbye", "utility"); res.Code != 2 {
		t.Errorf("categories set goodbye utility: exit %d, want 2 (a shipped kind's category is fixed)", res.Code)
	}
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "categories", "set", "promo", "loud"); res.Code != 2 {
		t.Errorf("categories set promo loud: exit %d, want 2", res.Code)
	}
	if res := run("--user-id", optedOut, "--type", "support_followup", "--key", "support.followup"); res.Code != 0 {
		t.Errorf("a declared utility follow-up to the opted-out user: exit %d: %s; want 0", res.Code, res.Stderr)
	}
	if res := run("--user-id", erased, "--type", "support_followup", "--key", "support.followup"); res.Code != 2 ||
		!strings.Contains(res.Stderr, "erased") {
		t.Errorf("a declared utility follow-up to the erased user: exit %d: %s; want 2, erased", res.Code, res.Stderr)
	}
	list := cmdtest.Exec(t, ctl.NewCommand, env, "categories", "list")
	if list.Code != 0 || !strings.Contains(list.Stdout, "support_followup") || !strings.Contains(list.Stdout, "(any other)") {
		t.Errorf("categories: exit %d:\n%s", list.Code, list.Stdout)
	}

	// Nothing refused was written: the opted-out user has the one declared
	// follow-up, the erased user nothing new, the held-out user the review.
	for user, want := range map[string]string{optedOut: "support_followup", erased: "", heldOut: "weekly_review", fine: "promo"} {
		var types []string
		for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Users: []string{user}, Status: "pending"}) {
			types = append(types, m.MessageType)
		}
		slices.Sort(types)
		got := strings.Join(types, ",")
		if got != want {
			t.Errorf("user's pending messages %q, want %q", got, want)
		}
	}

	// The bot's own SQL is a door too: a confirmation it writes by hand is
	// refused by the database (EN010).
	err := fixture.CtlBotConfirmation(ctx, pool, optedOut)
	if err == nil || !strings.Contains(err.Error(), "EN010") {
		t.Errorf("a hand-written confirmation: %v, want SQLSTATE EN010", err)
	}
}

func TestMain(m *testing.M) { cmdtest.Main(m) }
