package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 56, finding 7: enqueue took a garbage JID, a 10,000-character
// type and --scheduled-for 0001-01-01 (queued for now). Each is refused:
// exit 2, one line naming the flag (never quoting the JID), nothing
// written; what WhatsApp accepts still queues.
func TestEnqueueRefusesWhatCannotBeSent(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	env := cmdtest.Env("DATABASE_URL=" + url)
	base := []string{"enqueue", "--user-id", user, "--key", "engagement.weekly_review.celebration", "--params", `{"count":"3"}`}
	soon := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	manyParams := `{"p0":"x"`
	for i := 1; i <= 32; i++ {
		manyParams += `,"p` + strings.Repeat("1", i) + `":"x"`
	}
	manyParams += "}"
	for _, tc := range []struct {
		name, flag string
		args       []string
	}{
		{"garbage JID", "--jid", []string{"--type", "weekly_review", "--jid", "not a jid 98765"}},
		{"a JID with spaces", "--jid", []string{"--type", "weekly_review", "--jid", "+55 11 98765-4321@s.whatsapp.net"}},
		{"a legacy @c.us JID", "--jid", []string{"--type", "weekly_review", "--jid", "5511987654321@c.us"}},
		{"a device's JID", "--jid", []string{"--type", "weekly_review", "--jid", "5511987654321:3@s.whatsapp.net"}},
		{"a newsletter", "--jid", []string{"--type", "weekly_review", "--jid", "120363123456789@newsletter"}},
		{"the status broadcast", "--jid", []string{"--type", "weekly_review", "--jid", "status@broadcast"}},
		{"a group JID to an individual", "--jid", []string{"--type", "weekly_review", "--destination", "individual", "--jid", "120363123456789012@g.us"}},
		{"a user's JID to a group", "--jid", []string{"--type", "weekly_review", "--destination", "group", "--jid", "5511987654321@s.whatsapp.net"}},
		{"a 10,000-character type", "--type", []string{"--type", strings.Repeat("promo", 2000)}},
		{"a 65-character type", "--type", []string{"--type", strings.Repeat("a", 65)}},
		{"an upper-case type", "--type", []string{"--type", "Promo"}},
		{"a type with a space", "--type", []string{"--type", "custom news"}},
		{"a type with a newline", "--type", []string{"--type", "promo\nx"}},
		{"a 129-character catalog key", "--key", []string{"--type", "promo", "--key", strings.Repeat("k", 129)}},
		{"a catalog key with a space", "--key", []string{"--type", "promo", "--key", "engagement.promo black"}},
		{"33 params", "--params", []string{"--type", "promo", "--params", manyParams}},
		{"a 1,025-character param", "--params", []string{"--type", "promo", "--params", `{"count":"` + strings.Repeat("9", 1025) + `"}`}},
		{"a param name with a space", "--params", []string{"--type", "promo", "--params", `{"first name":"Ana"}`}},
		{"scheduled for 0001-01-01", "--scheduled-for", []string{"--type", "promo", "--scheduled-for", "0001-01-01T00:00:00Z"}},
		{"scheduled for 1999", "--scheduled-for", []string{"--type", "promo", "--scheduled-for", "1999-12-31T23:59:59Z"}},
		{"scheduled two years ahead", "--scheduled-for", []string{"--type", "promo", "--scheduled-for", time.Now().AddDate(2, 0, 0).UTC().Format(time.RFC3339)}},
		{"a period from 0001-01-01", "--period-start", []string{"--type", "promo", "--scheduled-for", soon, "--period-start", "0001-01-01T00:00:00Z"}},
		{"replayable until 9999", "--replay-until", []string{"--type", "promo", "--replay-until", "9999-12-31T00:00:00Z"}},
	} {
		res := cmdtest.Exec(t, ctl.NewCommand, env, append(append([]string{}, base...), tc.args...)...)
		lines := cmdtest.Lines(res.Stderr)
		if res.Code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.flag) {
			t.Errorf("%s: exit %d, stderr %.300q; want exit 2 and one line naming %s", tc.name, res.Code, res.Stderr, tc.flag)
		}
		if strings.Contains(res.Stderr, "98765") {
			t.Errorf("%s: the error quotes the JID: %s", tc.name, res.Stderr)
		}
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{}); n != 0 {
		t.Errorf("%d messages written by refused calls, want none", n)
	}

	// What WhatsApp (Baileys) accepts, and the types that exist, still queue.
	for _, args := range [][]string{
		{"--type", "weekly_review", "--jid", "5511987654321@s.whatsapp.net"},
		{"--type", "support_followup", "--destination", "individual", "--jid", "551187654321@s.whatsapp.net"},
		{"--type", "custom_news", "--jid", "123456789012345@lid"},
		{"--type", "promo", "--destination", "group", "--jid", "120363123456789012@g.us"},
		{"--type", "promo", "--destination", "group", "--jid", "5511987654321-1612345678@g.us"},
		{"--type", "a" + strings.Repeat("b.c-d_9", 9), "--scheduled-for", time.Now().AddDate(0, 11, 0).UTC().Format(time.RFC3339)},
		{"--type", "opt_out_reminder", "--scheduled-for", "2000-01-01T00:00:00Z", "--params", manyParams[:strings.LastIndex(manyParams, ",")] + "}"},
	} {
		if res := cmdtest.Exec(t, ctl.NewCommand, env, append(append([]string{}, base...), args...)...); res.Code != 0 {
			t.Errorf("%v: exit %d, %s; want it queued", args, res.Code, res.Stderr)
		}
	}
}
