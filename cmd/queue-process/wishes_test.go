package main_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/webhooktest"
)

// wishBound is the documented bound (docs/delivery.md, delivery.WishBound):
// no request starts later than this after the commit of an opt-out or an
// erase it does not obey.
const wishBound = 250 * time.Millisecond

// queueReviews queues n weekly reviews for user, due one after another
// (keys <user>:r<i>), to jid, each for an ISO week of its own (the last
// n weeks: one review a week, as verify checks).
func queueReviews(t *testing.T, pool *pgxpool.Pool, user, jid string, n int) {
	t.Helper()
	now := time.Now()
	for i := 1; i <= n; i++ {
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey,
			Params: `{"count":"2"}`, JID: jid, ScheduledFor: now.Add(-time.Minute + time.Duration(i)*time.Millisecond),
			Key: fmt.Sprintf("%s:r%d", user, i), PeriodStart: weeksBack(now, i)})
	}
}

// weeksBack is the start (Monday 00:00 UTC) of the ISO week n weeks
// before now's.
func weeksBack(now time.Time, n int) time.Time {
	day := now.UTC().Truncate(24 * time.Hour)
	monday := day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
	return monday.AddDate(0, 0, -7*n)
}

// holdingJIDs counts user's messages whose row or ledger row holds a JID
// or a provider id again.
func holdingJIDs(t *testing.T, pool *pgxpool.Pool, user string) int {
	t.Helper()
	n := 0
	for _, m := range fixture.AllMessages(t, pool) {
		if m.UserID != user {
			continue
		}
		l := fixture.LedgerOf(t, pool, m.ID, "webhook")
		if m.DestinationJID != "" || m.ProviderMessageID != nil || l != nil && l.ProviderMessageID != nil {
			// Which row and what it holds, never the values.
			ledger := "none"
			if l != nil {
				ledger = fmt.Sprintf("%s, provider id %t", l.Status, l.ProviderMessageID != nil)
			}
			t.Logf("%s (%s): JID kept %t, provider id %t; ledger: %s", m.Key(), m.Status, m.DestinationJID != "",
				m.ProviderMessageID != nil, ledger)
			n++
		}
	}
	return n
}

// slow answers 200 after d: the receiver's own latency.
func slow(d time.Duration) webhooktest.Fault {
	return func(conn *net.TCPConn, req webhooktest.Request, done <-chan struct{}) {
		select {
		case <-time.After(d):
		case <-done:
		}
		webhooktest.OK()(conn, req, done)
	}
}

// lateRequests returns the requests for user's messages that reached the
// receiver more than wishBound after the wish committed at wished.
func lateRequests(reqs []webhooktest.Request, user string, wished time.Time) []string {
	var late []string
	for _, r := range reqs {
		if strings.HasPrefix(r.IdempotencyKey, user+":") && r.At.Sub(wished) > wishBound {
			late = append(late, fmt.Sprintf("%s at %+dms", r.IdempotencyKey, r.At.Sub(wished).Milliseconds()))
		}
	}
	return late
}

// checkRecords checks that every message the receiver got is recorded
// sent, and every other one cancelled for the opt-out: opted_out, or, for
// an erased user's message its holder's check cancelled, erased (the rule
// of every door; the erase's own opt-out cancels the pending ones
// opted_out).
func checkRecords(t *testing.T, pool *pgxpool.Pool, reqs []webhooktest.Request, user string) (sent, cancelled int) {
	t.Helper()
	got := map[string]bool{}
	for _, r := range reqs {
		got[r.IdempotencyKey] = true
	}
	records := outcomes(t, pool, func(m fixture.MessageRow) string {
		if user != "" && m.UserID != user {
			return ""
		}
		return m.Key()
	}, statusText)
	for key, rec := range records {
		switch {
		case got[key] && rec != "sent":
			t.Errorf("%s reached the receiver, recorded %q", key, rec)
		case got[key]:
			sent++
		case rec != "cancelled:opted_out" && rec != "cancelled:erased":
			t.Errorf("%s never reached the receiver, recorded %q; want cancelled:opted_out or cancelled:erased", key, rec)
		default:
			cancelled++
		}
	}
	return sent, cancelled
}

// verifyAgrees runs engagementctl verify: every check must pass.
func verifyAgrees(t *testing.T, env []string) {
	t.Helper()
	if v := cmdtest.Exec(t, ctl.NewCommand, env, "verify"); v.Code != 0 {
		t.Errorf("engagementctl verify: exit %d: %s%s", v.Code, v.Stdout, v.Stderr)
	}
}

// Issue 56, finding 2: six weekly reviews for one user; `engagementctl
// erase --yes` runs while the receiver holds the first request, which it
// answers 300 ms after the erase committed (longer than the bound). Before,
// erase cancelled the claimed messages and dropped their claims, the check
// before each send looked only at rows still claimed, and all five others
// went out (paced and unpaced), every one of the six recorded
// cancelled/opted_out. Now no request starts later than the bound after the
// erase, the first one is recorded sent (its request went out), without
// its provider id, and the rest cancelled.
func TestEraseStopsClaimedMessagesAndKeepsTheTruth(t *testing.T) {
	t.Parallel()
	ctlBin := cmdtest.Build(t, "./cmd/engagementctl")
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"unpaced", []string{"--send-interval", "0"}},
		{"paced", []string{"--send-interval", "400ms"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			pool, url := pgtest.NewPool(t)
			jid := "5511900000002@s.whatsapp.net"
			user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: &jid})
			queueReviews(t, pool, user, jid, 6)
			env := cmdtest.Env("DATABASE_URL="+url, "USER=dpo")
			var erased atomic.Pointer[time.Time]
			var first atomic.Bool
			bot := webhooktest.New(t, func(conn *net.TCPConn, req webhooktest.Request, done <-chan struct{}) {
				if !first.CompareAndSwap(false, true) {
					webhooktest.OK()(conn, req, done)
					return
				}
				res := cmdtest.Run(t, ctlBin, env, "erase", "--user-id", user, "--yes")
				at := time.Now() // the erase had committed by then
				erased.Store(&at)
				if res.Code != 0 {
					t.Errorf("erase: exit %d: %s", res.Code, res.Stderr)
				}
				slow(wishBound+50*time.Millisecond)(conn, req, done)
			})
			qenv := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.URL)
			if res := cmdtest.Run(t, binary(t), qenv, mode.args...); res.Code != 0 {
				t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
			}
			reqs := bot.Requests()
			if erased.Load() == nil {
				t.Fatal("the receiver got no request")
			}
			if late := lateRequests(reqs, user, *erased.Load()); len(late) > 0 {
				t.Errorf("requests started after the erase's bound: %v", late)
			}
			sent, cancelled := checkRecords(t, pool, reqs, user)
			if sent < 1 || sent+cancelled != 6 {
				t.Errorf("%d sent, %d cancelled; want the first sent and all six accounted for", sent, cancelled)
			}
			if n := holdingJIDs(t, pool, user); n != 0 {
				t.Errorf("%d of the erased user's rows hold their JID or a provider id again", n)
			}
			verifyAgrees(t, env)
		})
	}
}

// Issue 56, finding 5: an opt-out (engagement_opt_out, as the bot calls
// it) commits while the receiver answers the first of one user's six
// claimed messages, unpaced; the receiver takes 150 ms per request. Before,
// the batch's check counted for a second: all five others went, the last
// at +750 ms. Now none starts later than the bound after the commit.
func TestOptOutReachesClaimedMessagesWithinTheBound(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	jid := "5511900000003@s.whatsapp.net"
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: &jid})
	queueReviews(t, pool, user, jid, 6)
	var optedOut atomic.Pointer[time.Time]
	bot := webhooktest.New(t, func(conn *net.TCPConn, req webhooktest.Request, done <-chan struct{}) {
		if optedOut.Load() == nil {
			fixture.BotOptOut(t, pool, user, "keyword")
			at := time.Now() // the opt-out had committed by then
			optedOut.Store(&at)
		}
		slow(150*time.Millisecond)(conn, req, done)
	})
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.URL)
	if res := cmdtest.Run(t, binary(t), env, "--send-interval", "0"); res.Code != 0 {
		t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
	}
	reqs := bot.Requests()
	if optedOut.Load() == nil {
		t.Fatal("the receiver got no request")
	}
	if late := lateRequests(reqs, user, *optedOut.Load()); len(late) > 0 {
		t.Errorf("requests started after the opt-out's bound: %v", late)
	}
	if sent, cancelled := checkRecords(t, pool, reqs, user); sent < 1 || sent+cancelled != 6 {
		t.Errorf("%d sent, %d cancelled; want the first sent and all six accounted for", sent, cancelled)
	}
	verifyAgrees(t, env)
}

// Issue 56, finding 5: Meta refuses the first of one user's three claimed
// messages with 131050 (the user stopped marketing messages), unpaced.
// The opt-out it records must stop the other two at once: before, they
// still went to Meta (the batch's check was younger than a second).
func TestError131050StopsTheUsersOtherClaimedMessages(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	api, requests := refusing131050(t)
	jid := "5511900000004@s.whatsapp.net"
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: &jid})
	queueReviews(t, pool, user, jid, 3)
	if res := cmdtest.Run(t, binary(t), cloudEnvAt(t, url, api.URL), "--send-interval", "0"); res.Code != 0 {
		t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
	}
	got := outcomes(t, pool, func(m fixture.MessageRow) string {
		if m.UserID != user {
			return ""
		}
		return m.Key()
	}, statusText)
	want := map[string]string{user + ":r1": "failed", user + ":r2": "cancelled:opted_out", user + ":r3": "cancelled:opted_out"}
	if n := requests.Load(); n != 1 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%d requests to Meta, messages %v; want 1 request, %v", n, got, want)
	}
}

// Issue 56, acceptance: 60 users with 4 weekly reviews each, paced and
// unpaced, through a receiver that takes 20 ms a request. When the first
// request for a user arrives, the receiver lands a wish for them: an erase
// (engagementctl erase, every even user) or an opt-out (engagement_opt_out,
// as the bot calls it, every odd one), while the user's other messages
// are claimed or about to be. No request may start later than the bound
// after its user's wish committed; every message the receiver got must be
// recorded sent, every other one cancelled; verify must agree. A trigger
// notes when each message was claimed, to show the wishes did land between
// claim and request.
func TestWishesRacingDelivery(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"unpaced", []string{"--send-interval", "0"}},
		{"paced", []string{"--send-interval", "15ms"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			raceWishes(t, mode.args)
		})
	}
}

func raceWishes(t *testing.T, args []string) {
	const users, each = 60, 4
	pool, url := pgtest.NewPool(t)
	fixture.NoteClaims(t, pool)
	ids := make([]string, users)
	byJID := map[string]int{}
	for i := range ids {
		jid := fmt.Sprintf("55119%08d@s.whatsapp.net", i)
		ids[i] = fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: &jid})
		byJID[jid] = i
	}
	// Each round of messages goes to every user before the next round:
	// a user's next message comes up while their wish is landing.
	now := time.Now()
	for r := 1; r <= each; r++ {
		for n, u := range ids {
			fixture.Queue(t, pool, fixture.Message{User: u, Type: "weekly_review", CatalogKey: fixture.WeeklyReview.CatalogKey,
				Params: `{"count":"2"}`, JID: fmt.Sprintf("55119%08d@s.whatsapp.net", n),
				ScheduledFor: now.Add(-time.Minute + time.Duration(r*users+n+1)*time.Millisecond),
				Key:          fmt.Sprintf("%s:r%d", u, r), PeriodStart: weeksBack(now, r)})
		}
	}

	env := cmdtest.Env("DATABASE_URL="+url, "USER=dpo")
	wished := make([]time.Time, users)
	var mu sync.Mutex
	var wishes sync.WaitGroup
	started := map[int]bool{}
	gate := make(chan struct{}, 4) // wishes landing at once
	bot := webhooktest.New(t, func(conn *net.TCPConn, req webhooktest.Request, done <-chan struct{}) {
		i, ok := byJID[req.Body.DestinationJID]
		mu.Lock()
		first := ok && !started[i]
		started[i] = true
		mu.Unlock()
		if first {
			wishes.Go(func() {
				gate <- struct{}{}
				defer func() { <-gate }()
				if i%2 == 0 {
					if res := cmdtest.Exec(t, ctl.NewCommand, env, "erase", "--user-id", ids[i], "--yes"); res.Code != 0 {
						t.Errorf("erase: exit %d: %s", res.Code, res.Stderr)
					}
				} else {
					fixture.BotOptOut(t, pool, ids[i], "keyword")
				}
				mu.Lock()
				wished[i] = time.Now() // the wish had committed by then
				mu.Unlock()
			})
		}
		slow(20*time.Millisecond)(conn, req, done)
	})
	qenv := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_TRANSPORT=webhook", "ENGAGEMENT_WEBHOOK_URL="+bot.URL)
	res := cmdtest.Run(t, binary(t), qenv, args...)
	wishes.Wait()
	if res.Code != 0 {
		t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
	}

	reqs := bot.Requests()
	var late []string
	mu.Lock()
	for i, u := range ids {
		late = append(late, lateRequests(reqs, u, wished[i])...)
	}
	mu.Unlock()
	sort.Strings(late)
	if len(late) > 0 {
		t.Errorf("%d requests started later than %s after their user's wish: %v", len(late), wishBound, late)
	}
	sent, cancelled := checkRecords(t, pool, reqs, "")
	if sent+cancelled != users*each {
		t.Errorf("%d sent and %d cancelled of %d messages", sent, cancelled, users*each)
	}
	// The race happened: messages claimed before their user's wish
	// committed that were then cancelled before their request.
	between, noted, userOf := 0, fixture.ClaimsNoted(t, pool), map[string]int{}
	for i, u := range ids {
		userOf[u] = i
	}
	for _, m := range fixture.AllMessages(t, pool) {
		if at, ok := noted[m.ID]; ok && m.Status == "cancelled" && at.Before(wished[userOf[m.UserID]]) {
			between++
		}
	}
	t.Logf("%d messages sent, %d cancelled, %d of them claimed before their user's wish", sent, cancelled, between)
	if between == 0 {
		t.Errorf("no wish landed between a claim and its request: the race did not happen")
	}
	verifyAgrees(t, env)
}

// refusing131050 is a fake Cloud API that refuses every send with 131050
// (the user stopped marketing messages from this business), as Meta does,
// and counts the sends.
func refusing131050(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // the run's read of the number's health, not a send
			w.WriteHeader(http.StatusNotFound)
			return
		}
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"(#131050) Unable to deliver the message. This recipient has chosen to stop receiving marketing messages on WhatsApp from your business.","type":"OAuthException","code":131050,"error_data":{"messaging_product":"whatsapp","details":"Unable to deliver the message."},"fbtrace_id":"Az8or2yhqkZfEZ-_4Qn_Bam"}}`))
	}))
	t.Cleanup(api.Close)
	return api, &requests
}
