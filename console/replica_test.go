package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 41, reads off the primary: with a replica (--replica-url) the
// snapshot pages read from it and say how far behind it is, while the
// actions and the audit stay on the primary. The replica is a real hot
// standby of the test cluster (pgtest.NewStandby): a user added on the
// primary while its replay is paused is not on the overview, whose footer
// says the replica is behind with replay paused; a cancel confirmed then
// changes the primary; once replay resumes the user shows.
func TestSnapshotPagesReadFromTheReplica(t *testing.T) {
	t.Parallel()
	// A cluster of the test's own: the shared server holds every test's
	// databases (a copy of it is large), and a DATABASE_URL server may
	// refuse replication connections.
	cluster := pgtest.NewCluster(t)
	pool := seedConsole(t, cluster.URL)
	standby := pgtest.NewStandby(t, cluster.URL)
	replica := openPool(t, standby.URL)
	c, srv := serveSnapshots(t, console.Config{Pool: pool, Replica: replica})
	ctx := context.Background()

	overview := func() (console.Overview, reply, string) {
		t.Helper()
		if got := c.RefreshRound(ctx); !strings.Contains(strings.Join(got, ","), "overview") {
			t.Fatalf("the round recomputed %v, not the overview", got)
		}
		var o console.Overview
		resp, body := getWithin(t, srv, "/", true, time.Minute)
		decode(t, body, &o)
		_, html := getWithin(t, srv, "/", false, time.Minute)
		return o, resp, footer(html)
	}
	before, resp, foot := overview()
	if before.Users != 300 {
		t.Fatalf("the overview read from the replica shows %d users, want the primary's 300", before.Users)
	}
	if resp.Header.Get("X-Replica-Lag") == "" || !strings.Contains(foot, "Read from the replica") || !strings.Contains(foot, "replica: ") {
		t.Errorf("a page read from the replica does not say so: X-Replica-Lag %q; footer:\n%s", resp.Header.Get("X-Replica-Lag"), foot)
	}

	standby.Pause(t)
	fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	standby.WaitReceived(t) // received, not replayed: the replica is behind
	paused, resp, foot := overview()
	if paused.Users != 300 {
		t.Errorf("replay paused, the overview shows %d users, want the replica's 300", paused.Users)
	}
	lag, err := strconv.ParseFloat(resp.Header.Get("X-Replica-Lag"), 64)
	if err != nil || lag <= 0 {
		t.Errorf("replay paused, X-Replica-Lag is %q, want seconds > 0", resp.Header.Get("X-Replica-Lag"))
	}
	if !regexp.MustCompile(`replica: [0-9.]+ (ms|s|min|h|d) behind, replay paused`).MatchString(foot) {
		t.Errorf("replay paused, the footer does not say how far behind the replica is:\n%s", foot)
	}

	// The actions and the audit are the primary's, paused replica or not.
	pendingReviews := fixture.Messages{Status: "pending", Type: "weekly_review"}
	weekly := int64(fixture.CountMessages(t, pool, pendingReviews))
	if weekly == 0 {
		t.Fatalf("pending weekly reviews: %d", weekly)
	}
	form := url.Values{"csrf": {csrfToken(t, srv, operator, operatorPassword)}, "kind": {"weekly_review"}}
	resp, body := post(t, srv, "/actions/cancel/confirm", operator, operatorPassword, form)
	var done console.ActionResult
	decode(t, body, &done)
	if resp.StatusCode != http.StatusOK || done.Messages != weekly {
		t.Fatalf("cancel with the replica paused: %d %s, want %d cancelled", resp.StatusCode, body, weekly)
	}
	if left := fixture.CountMessages(t, pool, pendingReviews); left != 0 {
		t.Errorf("after the cancel the primary has %d pending weekly reviews, want 0", left)
	}
	var audit console.Audit
	_, body = get(t, srv, "/audit", operator, operatorPassword, true)
	decode(t, body, &audit)
	if len(audit.Entries) != 1 || audit.Entries[0].Messages != weekly {
		t.Errorf("the audit page (the primary's) shows %+v, want the cancel, with replay still paused", audit.Entries)
	}

	standby.Resume(t)
	after, _, foot := overview()
	if after.Users != 301 {
		t.Errorf("after replay resumed the overview shows %d users, want 301", after.Users)
	}
	if strings.Contains(foot, "paused") {
		t.Errorf("after replay resumed the footer still says paused:\n%s", foot)
	}
}

// The primary's own URL given as the replica: the pages read from it, and
// say it is not a standby, so what they show is current.
func TestReplicaURLOfAPrimary(t *testing.T) {
	t.Parallel()
	_, pool := consoleDatabase(t)
	_, srv := serveSnapshots(t, console.Config{Pool: pool, Replica: pool})
	resp, html := getWithin(t, srv, "/queue", false, time.Minute)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Replica-Lag") != "0" ||
		!strings.Contains(footer(html), "is not a standby") {
		t.Errorf("a primary as the replica: %d, X-Replica-Lag %q; footer:\n%s", resp.StatusCode, resp.Header.Get("X-Replica-Lag"), footer(html))
	}
}
