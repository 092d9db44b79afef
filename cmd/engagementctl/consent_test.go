package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 44: engagementctl opt-out and opt-in over engagement_opt_out and
// engagement_opt_in: one line, changed or already so; exit 2 for bad
// input and for a user without a profile.
func TestOptOutAndOptInThroughTheCommand(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
		JID: "5511900000001@s.whatsapp.net"})
	env := cmdtest.Env("DATABASE_URL="+url, "USER=ana")

	steps := []struct {
		args   []string
		code   int
		stdout string
	}{
		{[]string{"opt-out", "--user-id", user}, 0, user + " opted out\n"},
		{[]string{"opt-out", "--user-id", user}, 0, user + " already opted out: nothing changed\n"},
		{[]string{"opt-in", "--user-id", user, "--output", "json"}, 0, `{"user_id":"` + user + `","opted_out":false,"changed":true}` + "\n"},
		{[]string{"opt-in", "--user-id", strings.ToUpper(user)}, 0, user + " already opted in: nothing changed\n"},
		{[]string{"opt-out", "--user-id", user, "--source", "support-ticket", "--actor", "bia", "--output", "json", "--confirm"}, 0,
			`{"user_id":"` + user + `","opted_out":true,"changed":true}` + "\n"},
		{[]string{"opt-out", "--user-id", user, "--confirm"}, 0, user + " already opted out: nothing changed\n"},
		{[]string{"opt-in", "--user-id", user, "--confirm"}, 2, ""},
		{[]string{"opt-out", "--user-id", "5511900000001"}, 2, ""},
		{[]string{"opt-out"}, 2, ""},
		{[]string{"opt-in", "--user-id", user, "--source", " "}, 2, ""},
		{[]string{"opt-in", "--user-id", user, "--source", strings.Repeat("x", 201)}, 2, ""},
		{[]string{"opt-in", "--user-id", fixture.NewID()}, 2, ""},
		{[]string{"opt-in", "--user-id", user, "--output", "yaml"}, 2, ""},
	}
	for _, s := range steps {
		res := cmdtest.Exec(t, ctl.NewCommand, env, s.args...)
		if res.Code != s.code || (s.code == 0 && res.Stdout != s.stdout) {
			t.Errorf("%v: exit %d, %q (%s); want %d, %q", s.args, res.Code, res.Stdout, res.Stderr, s.code, s.stdout)
		}
	}
	var got []string
	for _, e := range fixture.ConsentEventsOf(t, pool, user) {
		actor := ""
		if e.Actor != nil {
			actor = *e.Actor
		}
		b, _ := json.Marshal([]any{e.OptedOut, e.Source, actor})
		got = append(got, string(b))
	}
	want := `["[true,\"engagementctl\",\"ana\"]","[false,\"engagementctl\",\"ana\"]","[true,\"support-ticket\",\"bia\"]"]`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("consent events %s, want %s", b, want)
	}
	n := 0
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Users: []string{user}, Status: "cancelled"}) {
		if m.CancelReason != nil && *m.CancelReason == "opted_out" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d messages cancelled as opted_out, want the pending one", n)
	}
	// The first opt-out did not ask for the confirmation; the third did,
	// and the repeat after it changed nothing, so queued none.
	if n := fixture.CountMessages(t, pool, fixture.Messages{Users: []string{user}, Type: "opt_out_confirmation", Status: "pending"}); n != 1 {
		t.Errorf("%d pending confirmations, want the one --confirm asked for", n)
	}
}

// Issue 56: an operator's opt-out and opt-in follow the user's time. Said
// now by default, they win over the user's older wishes; with --at (when
// the user said it: an e-mail read late), one older than the user's
// newest wish changes nothing and is recorded as superseded, and the
// command says so.
func TestTheCommandsFollowTheUsersTime(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	env := cmdtest.Env("DATABASE_URL="+url, "USER=ana")
	fixture.CtlOptOutAgo(t, pool, user, "bot:keyword", 10*time.Minute)
	hourAgo := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)

	steps := []struct {
		args   []string
		code   int
		stdout string
	}{
		{[]string{"opt-in", "--user-id", user, "--at", hourAgo}, 0,
			user + " not opted in: superseded by a wish the user made later; recorded as superseded, nothing changed\n"},
		{[]string{"opt-in", "--user-id", user, "--at", hourAgo, "--source", "support:ticket-7", "--output", "json"}, 0,
			`{"user_id":"` + user + `","opted_out":false,"changed":false,"superseded":true}` + "\n"},
		{[]string{"opt-in", "--user-id", user, "--at", "yesterday"}, 2, ""},
		{[]string{"opt-in", "--user-id", user, "--at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, 2, ""},
		{[]string{"opt-in", "--user-id", user}, 0, user + " opted in\n"}, // now: newer than the keyword
	}
	for _, s := range steps {
		res := cmdtest.Exec(t, ctl.NewCommand, env, s.args...)
		if res.Code != s.code || (s.code == 0 && res.Stdout != s.stdout) {
			t.Errorf("%v: exit %d, %q (%s); want %d, %q", s.args, res.Code, res.Stdout, res.Stderr, s.code, s.stdout)
		}
	}
	var log []string
	for _, e := range fixture.ConsentEventsOf(t, pool, user) {
		log = append(log, fmt.Sprintf("%t %s %t", e.OptedOut, e.Source, e.Superseded))
	}
	got := strings.Join(log, ", ")
	if want := "true bot:keyword false, false engagementctl true, false support:ticket-7 true, false engagementctl false"; got != want {
		t.Errorf("consent log %q, want %q", got, want)
	}
}
