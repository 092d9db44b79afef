package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 56, finding 7: after engagementctl erase, an audit row kept a
// requeue reason holding the user's phone in another format ("asked on +55
// (11) 98765-4321" for 5511987654321@s.whatsapp.net): erase looked for the
// JID and its digits literally. The reasons are written by the console's
// requeue, as an operator would; the job runs' errors as a run records
// them. Every way of writing the number below goes; another user's number
// and a reason naming nobody stay.
func TestEraseFindsThePhoneNumberHoweverItIsWritten(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.NewPool(t)
	srv, _ := serveLogged(t, pool)
	jid, otherJID := "5511987654321@s.whatsapp.net", "551187650000@s.whatsapp.net" // the other: a mobile WhatsApp names without its 9
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: &jid})
	other := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: &otherJID})
	token := csrfToken(t, srv, operator, operatorPassword)

	erased := []string{
		"asked on +55 (11) 98765-4321",
		"called from 11 98765.4321, ticket 77",
		"old number (11) 8765-4321",                   // without the mobile 9
		"whatsapp 0xx 11 98765 4321 after the outage", // a trunk and carrier prefix
		"+5511987654321",
	}
	kept := []string{
		"receiver back up, ticket 77",
		"the other user: +55 (11) 98765-0000", // the other's number, with the 9 WhatsApp left out
		"4321 messages, 98765 users",
	}
	for _, reason := range append(append([]string{}, erased...), kept...) {
		// A failed message to requeue (the other user's: the filter does not
		// name the erased one, only the reason does).
		fixture.Queue(t, pool, fixture.Message{User: other, Type: "goodbye", CatalogKey: "engagement.goodbye.self_select", JID: otherJID,
			Status: "failed", Error: "webhook: receiver answered 502"})
		resp, body := post(t, srv, "/actions/requeue/confirm", operator, operatorPassword, url.Values{"csrf": {token},
			"status": {"failed"}, "error_group": {"webhook: receiver answered 502"}, "reason": {reason}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("requeue with the reason %q: %d %s", reason, resp.StatusCode, body)
		}
	}
	now := fixture.Now(t, pool)
	for _, r := range []struct{ err, counters string }{
		{"webhook: bad number +55 (11) 98765-4321", `{"sent": 3}`},
		{"webhook: receiver answered 502", `{"sent": 3, "note": "55 11 98765-4321"}`},
		{"webhook: bad number +55 (11) 98765-0000", `{"sent": 3}`},
	} {
		fixture.RecordRun(t, pool, fixture.RunRecord{Job: "queue-process", AsOf: now, StartedAt: now, Status: "failed", FinishedAt: now,
			Error: r.err, Counters: r.counters})
	}

	env := cmdtest.Env("DATABASE_URL="+dbURL, "USER=dpo")
	res := cmdtest.Exec(t, ctl.NewCommand, env, "erase", "--user-id", user, "--yes", "--output", "json")
	var rep struct {
		ConsoleAudit int64 `json:"console_audit"`
		JobRuns      int64 `json:"job_runs"`
	}
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &rep) != nil {
		t.Fatalf("erase: exit %d, %q (%s)", res.Code, res.Stdout, res.Stderr)
	}
	if rep.ConsoleAudit != int64(len(erased)) || rep.JobRuns != 2 {
		t.Errorf("erase scrubbed %d audit rows and %d job runs, want %d and 2", rep.ConsoleAudit, rep.JobRuns, len(erased))
	}

	var a console.Audit
	_, body := get(t, srv, "/audit", viewer, viewerPassword, true)
	decode(t, body, &a)
	reasons := map[string]bool{}
	for _, e := range a.Entries {
		if e.Action == "requeue" {
			reasons[e.Reason] = true
		}
	}
	for _, r := range erased {
		if reasons[r] {
			t.Errorf("after erase, the audit still holds the reason %q", r)
		}
	}
	for _, r := range kept {
		if !reasons[r] {
			t.Errorf("erase removed the reason %q, which names someone else or nobody", r)
		}
	}
	var errs []string
	for _, r := range fixture.ConsoleJobRuns(t, pool) {
		if r.Error == nil || r.Counters == nil { // NULL, as error || ' ' || counters::text would read it
			t.Fatalf("job run %d after erase: error %v, counters %v, want both", r.ID, r.Error, r.Counters)
		}
		errs = append(errs, *r.Error+" "+*r.Counters)
	}
	want := []string{`[erased] {"sent": 3}`, `webhook: receiver answered 502 {"erased": true}`, `webhook: bad number +55 (11) 98765-0000 {"sent": 3}`}
	if len(errs) != len(want) || errs[0] != want[0] || errs[1] != want[1] || errs[2] != want[2] {
		t.Errorf("job runs after erase: %q, want %q", errs, want)
	}
}
