package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
)

// person is one user seeded with a trace in every table that can hold
// one: a JID whose digits and a marker that appear nowhere else.
type person struct {
	id, jid, digits, marker string
}

// seedPerson inserts a user, silent for 20 days (the daily job would send
// them a goodbye), with a message in every status (params and errors
// carrying the marker and the digits), send-ledger rows, send-budget
// rows, a bot request key, consent events, a dedupe key and a console
// audit row naming them.
func seedPerson(t *testing.T, pool *pgxpool.Pool, digits string) person {
	t.Helper()
	ctx := context.Background()
	p := person{jid: digits + "@s.whatsapp.net", digits: digits, marker: "MARKER-" + fixture.NewID()[:13]}
	p.id = fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now().Add(-20 * 24 * time.Hour), WhatsAppJID: &p.jid})
	params := fmt.Sprintf(`{"name": %q, "phone": %q}`, p.marker, p.digits)
	ids := fixture.CtlErasePerson(t, pool, fixture.ErasedPerson{User: p.id, JID: p.jid, Digits: p.digits, Marker: p.marker, Params: params})
	if len(ids) != 5 {
		t.Fatalf("the seed queued %d messages, want one in each of 5 statuses: %v", len(ids), ids)
	}
	for _, status := range []string{"sent", "failed"} {
		row := fixture.LedgerRow{Message: ids[status], Transport: "webhook", Status: status, ProviderID: "wamid." + p.digits}
		if status == "failed" {
			row.Error = "rejected " + p.digits + " " + p.marker
		}
		fixture.Ledger(t, pool, row)
	}
	for _, out := range []bool{true, false} { // out and back in: two consent events
		call := map[bool]func(context.Context, activity.Querier, string, string, activity.ConsentOptions) (bool, error){
			true: activity.OptOut, false: activity.OptIn}[out]
		if _, err := call(ctx, pool, p.id, activity.SourceKeyword, activity.ConsentOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The opt-out cancelled the pending message: queue it again, as if the
	// bot had after the opt-in.
	fixture.SetMessages(t, pool, fixture.MessageChange{ID: fixture.MessageByKey(t, pool, p.id+":weekly_review:2026-W00").ID,
		SetStatus: "pending", CancelReason: fixture.Ptr("")})
	return p
}

// snapshot is every row of every table of the schema, as text, by table.
func snapshot(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	return fixture.CtlTableRows(t, pool)
}

// traces lists each text, jsonb, array or bytea column of the engagement_*
// tables (the queue among them) holding one of needles.
func traces(t *testing.T, pool *pgxpool.Pool, needles ...string) []string {
	t.Helper()
	all := fixture.CtlTraces(t, pool, needles...)
	columns := map[string]bool{}
	var found []string
	for _, c := range all {
		columns[c.Table+"."+c.Column] = true
		if c.Hits > 0 {
			found = append(found, fmt.Sprintf("%s.%s (%d rows)", c.Table, c.Column, c.Hits))
		}
	}
	if len(columns) < 20 {
		t.Fatalf("%d columns to scan: the scan is broken", len(columns))
	}
	return found
}

// Issue 44: engagementctl erase removes every trace of the user's
// WhatsApp id and message contents from the scheduler's tables, and
// nothing is sent to them afterwards; without --yes it changes nothing;
// another user's data is untouched.
func TestEraseLeavesNoTraceAndNothingIsSentAfterwards(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	gone := seedPerson(t, pool, "5511987650001")
	kept := seedPerson(t, pool, "5511987650002")
	if found := traces(t, pool, gone.digits, gone.marker); len(found) < 8 {
		t.Fatalf("the seed left traces in only %v: the test would prove little", found)
	}
	bot := webhooktest.New(t)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.URL, "USER=dpo")

	// Refused: no --yes, not a UUID, nobody's id. Nothing changes.
	before := snapshot(t, pool)
	for _, args := range [][]string{
		{"erase", "--user-id", gone.id},
		{"erase", "--user-id", gone.id, "--output", "json"},
		{"erase", "--user-id", "5511987650001", "--yes"},
		{"erase", "--user-id", fixture.NewID(), "--yes"},
		{"erase", "--yes"},
	} {
		res := cmdtest.Exec(t, ctl.NewCommand, env, args...)
		if res.Code != cli.ExitUsage {
			t.Errorf("%v: exit %d (%s), want 2", args, res.Code, res.Stderr)
		}
		if strings.Contains(res.Stderr+res.Stdout, gone.jid) {
			t.Errorf("%v: the output names the JID: %s", args, res.Stderr)
		}
	}
	after := snapshot(t, pool)
	for tb, rows := range before {
		if after[tb] != rows {
			t.Errorf("a refused erase changed %s", tb)
		}
	}

	res := cmdtest.Exec(t, ctl.NewCommand, env, "erase", "--user-id", gone.id, "--yes", "--output", "json")
	var rep struct {
		UserID           string `json:"user_id"`
		OptedOut         bool   `json:"opted_out"`
		Messages         int64  `json:"messages"`
		Cancelled        int64  `json:"cancelled"`
		Ledger           int64  `json:"ledger"`
		BudgetRecipients int64  `json:"budget_recipients"`
		BudgetClaims     int64  `json:"budget_claims"`
		FireRequests     int64  `json:"fire_requests"`
		IdempotencyKeys  int64  `json:"idempotency_keys"`
		ConsoleAudit     int64  `json:"console_audit"`
	}
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &rep) != nil {
		t.Fatalf("erase: exit %d, %q (%s)", res.Code, res.Stdout, res.Stderr)
	}
	// Cancelled: the pending message. The one in flight is left to its
	// holder, which checks it again before its request (issue 56).
	want := [...]int64{5, 1, 2, 1, 1, 1, 1, 1}
	got := [...]int64{rep.Messages, rep.Cancelled, rep.Ledger, rep.BudgetRecipients, rep.BudgetClaims, rep.FireRequests,
		rep.IdempotencyKeys, rep.ConsoleAudit}
	if rep.UserID != gone.id || !rep.OptedOut || got != want {
		t.Errorf("erase reported %+v; want counts %v, opted out", rep, want)
	}
	if strings.Contains(res.Stderr+res.Stdout, gone.jid) || strings.Contains(res.Stderr, gone.marker) {
		t.Errorf("erase's output names the JID or the marker: %s", res.Stderr)
	}

	if found := traces(t, pool, gone.digits, gone.marker); len(found) > 0 {
		t.Errorf("after erase, the person's JID or contents are still in %v", found)
	}
	if hashes := fixture.CtlJIDHashes(t, pool, gone.jid); hashes != 0 {
		t.Errorf("%d send-budget rows still hold the MD5 of the JID", hashes)
	}
	// The funnel's counts: every message is still there, in its status
	// (what was pending cancelled, what was in flight still its holder's),
	// the slot still spent.
	f := fixture.CtlUserFunnel(t, pool, gone.id)
	sent, failed, cancelled, slots := f.Sent, f.Failed, f.Cancelled, f.Slots
	if sent != 1 || failed != 1 || cancelled != 2 || slots != 2 {
		t.Errorf("after erase: %d sent, %d failed, %d cancelled, %d budget slots; want 1, 1, 2 and 2", sent, failed, cancelled, slots)
	}
	// Consent: the history stays, by user id, ending with erase's opt-out.
	events, source := fixture.ConsentEventsOf(t, pool, gone.id), ""
	if len(events) > 0 {
		source = events[len(events)-1].Source
	}
	if len(events) != 3 || source != "erase" {
		t.Errorf("consent events: %d, latest from %q; want 3, the latest from erase", len(events), source)
	}

	// The other person is untouched.
	if found := traces(t, pool, kept.digits, kept.marker); len(found) < 8 {
		t.Errorf("the other user's data was touched: their traces are left in only %v", found)
	}

	// A second erase is harmless.
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "erase", "--user-id", gone.id, "--yes"); res.Code != 0 ||
		!strings.Contains(res.Stdout, "already opted out") {
		t.Errorf("erase again: exit %d, %q (%s)", res.Code, res.Stdout, res.Stderr)
	}

	// The real jobs send them nothing: the daily job (a goodbye is due for
	// both, 20 days silent) and queue-process, on a webhook receiver.
	if res := cmdtest.Exec(t, jobcmd.NewDailyCommand, env, "--send-interval", "0", "--output", "json"); res.Code != 0 {
		t.Fatalf("engagement-daily: exit %d: %s", res.Code, res.Stderr)
	} else {
		t.Logf("daily: %s", res.Stdout)
	}
	if res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--send-interval", "0", "--output", "json"); res.Code != 0 {
		t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
	}
	toKept := 0
	for _, r := range bot.Requests() {
		if strings.HasPrefix(r.IdempotencyKey, gone.id) || strings.Contains(r.Body.DestinationJID, gone.digits) {
			t.Errorf("the erased user was sent %s", r.IdempotencyKey)
		}
		if strings.HasPrefix(r.IdempotencyKey, kept.id) {
			toKept++
		}
	}
	if toKept < 1 { // the goodbye (their pending review went stale)
		for _, r := range bot.Requests() {
			t.Logf("sent %s", r.IdempotencyKey)
		}
		t.Errorf("the other user got %d messages, want their goodbye: the jobs did not run", toKept)
	}
	if found := traces(t, pool, gone.digits, gone.marker); len(found) > 0 {
		t.Errorf("after the jobs ran, the person's JID or contents are back in %v", found)
	}
}
