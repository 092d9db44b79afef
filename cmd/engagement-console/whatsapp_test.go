package main_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

const (
	appSecret   = "meta-app-secret-0123456789"
	verifyToken = "meta-verify-token"
)

// Issue 43: Meta's webhook through the shipped engagement-console, with a
// Meta that lies (no signature, another app's, a tampered body, 10 MB,
// garbage) and one that tells the truth out of order and twice, as its
// retries do. Nothing unsigned changes anything; the truth lands once;
// the app secret never reaches the log; the pages still want credentials.
func TestMetasWebhookThroughTheBinary(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	sent := time.Now().Add(-3 * time.Hour)
	id := fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.default",
		JID: "5511999990000@s.whatsapp.net", ScheduledFor: sent, Key: "g1", Status: "sent", SentAt: sent,
		ProviderID: "wamid.HBgLNTUxMTk5OTk5MDAwMBUCABEYEjA="})
	c := startConsole(t, cmdtest.Build(t, "./cmd/engagement-console"), url,
		"--whatsapp-app-secret", appSecret, "--whatsapp-verify-token", verifyToken)
	hook := c.base + "/webhooks/whatsapp"
	post := func(body []byte, sig string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hook, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if sig != "" {
			req.Header.Set("X-Hub-Signature-256", sig)
		}
		res, err := c.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	row := func() string {
		m := fixture.MessageByID(t, pool, id)
		at := func(p *time.Time) string {
			if p == nil {
				return "-"
			}
			return p.Format(time.RFC3339Nano)
		}
		msg := "-"
		if m.ErrorMessage != nil {
			msg = *m.ErrorMessage
		}
		return m.Status + " " + at(m.DeliveredAt) + " " + at(m.ReadAt) + " " + msg
	}
	before := row()

	res, err := c.client.Get(hook + "?hub.mode=subscribe&hub.challenge=424242&hub.verify_token=" + verifyToken)
	if err != nil {
		t.Fatal(err)
	}
	challenge, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(challenge) != "424242" {
		t.Errorf("Meta's handshake: %d %q, want 200 and the challenge", res.StatusCode, challenge)
	}

	now := time.Now().Truncate(time.Second)
	wamid := "wamid.HBgLNTUxMTk5OTk5MDAwMBUCABEYEjA="
	delivered, read := metafake.Statuses(metafake.Status(wamid, "delivered", now.Add(-2*time.Hour), "")), metafake.Statuses(metafake.Status(wamid, "read", now.Add(-time.Hour), ""))
	big := bytes.Repeat([]byte(" "), 10<<20)
	for name, l := range map[string]struct {
		body []byte
		sig  string
		want int
	}{
		"no signature":      {read, "", 401},
		"another app's":     {read, metafake.Sign("another-app", read), 403},
		"a tampered body":   {append(bytes.Clone(read[:len(read)-3]), []byte(`]}]}`)...), metafake.Sign(appSecret, read), 403},
		"10 MB":             {big, metafake.Sign(appSecret, big), 413},
		"garbage, unsigned": {[]byte("\x00\x01garbage"), "", 401},
	} {
		if got := post(l.body, l.sig); got != l.want {
			t.Errorf("%s: %d, want %d", name, got, l.want)
		}
	}
	if got := row(); got != before {
		t.Fatalf("after the lies: %q, want unchanged %q", got, before)
	}
	// The truth, read before delivered, each twice (Meta's retries).
	for _, b := range [][]byte{read, delivered, read, delivered} {
		if got := post(b, metafake.Sign(appSecret, b)); got != 200 {
			t.Fatalf("a signed status: %d, want 200", got)
		}
	}
	m := fixture.MessageByID(t, pool, id)
	if m.DeliveredAt == nil || m.ReadAt == nil {
		t.Fatalf("delivered %v, read %v; want both", m.DeliveredAt, m.ReadAt)
	}
	deliveredAt, readAt := *m.DeliveredAt, *m.ReadAt
	if !deliveredAt.Equal(now.Add(-2*time.Hour)) || !readAt.Equal(now.Add(-time.Hour)) {
		t.Errorf("delivered %s, read %s; want %s and %s", deliveredAt, readAt, now.Add(-2*time.Hour), now.Add(-time.Hour))
	}
	if strings.Contains(c.stderr(), appSecret) || strings.Contains(c.stderr(), verifyToken) || strings.Contains(c.stderr(), "5511999990000") {
		t.Errorf("the console's log carries the app secret, the verify token or a number:\n%s", c.stderr())
	}
	page, err := c.client.Get(c.base + "/queue")
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /queue without credentials: %d, want 401", page.StatusCode)
	}
}

// The app secret without the verify token (or the other way round) is a
// configuration error: exit 2, one line.
func TestMetasWebhookNeedsBothFlags(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	bin := cmdtest.Build(t, "./cmd/engagement-console")
	for _, args := range [][]string{{"--whatsapp-app-secret", appSecret}, {"--whatsapp-verify-token", verifyToken}} {
		res := cmdtest.Run(t, bin, cmdtest.Env("DATABASE_URL="+url), append([]string{"--listen", "127.0.0.1:0"}, args...)...)
		if res.Code != 2 || len(cmdtest.Lines(res.Stderr)) != 1 || !strings.Contains(res.Stderr, "go together") || strings.Contains(res.Stderr, appSecret) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line saying both are needed, without the secret", args, res.Code, res.Stderr)
		}
	}
}

// Issue 44: WhatsApp's own "stop promotions", by Meta's user_preferences
// webhook through the shipped console: a signed stop opts the user out
// (recorded from Meta, their pending goodbye cancelled), a repeat records
// nothing more, an unsigned stop for another user changes nothing, a
// signed resume opts back in.
func TestMetasUserPreferencesThroughTheBinary(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	mk := func(jid string) string {
		user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now().Add(-20 * 24 * time.Hour)})
		fixture.SetJID(t, pool, user, &jid)
		fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.default", JID: jid,
			ScheduledFor: time.Now().Add(time.Hour), Key: user + ":g"})
		return user
	}
	maria, joao := mk("5511988887777@s.whatsapp.net"), mk("5511977776666@s.whatsapp.net")
	c := startConsole(t, cmdtest.Build(t, "./cmd/engagement-console"), url,
		"--whatsapp-app-secret", appSecret, "--whatsapp-verify-token", verifyToken)
	post := func(body []byte, sig string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, c.base+"/webhooks/whatsapp", bytes.NewReader(body))
		if sig != "" {
			req.Header.Set("X-Hub-Signature-256", sig)
		}
		res, err := c.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	state := func(user string) string {
		msgs := fixture.MessagesOf(t, pool, user)
		if len(msgs) != 1 {
			t.Fatalf("%s has %d messages, want the one goodbye", user, len(msgs))
		}
		fromMeta := fixture.CountWhere(fixture.ConsentEventsOf(t, pool, user),
			func(e fixture.ConsentRow) bool { return e.Source == "meta:user_preferences" })
		return strconv.FormatBool(fixture.ProfileOf(t, pool, user).ReengagementOptOut) + " " + msgs[0].Status + " " + strconv.Itoa(fromMeta)
	}
	at := time.Now().Add(-time.Minute)
	stopJoao := metafake.Preference("5511977776666", "stop", at)
	if got := post(stopJoao, ""); got != 401 {
		t.Errorf("an unsigned stop: %d, want 401", got)
	}
	if got := post(stopJoao, metafake.Sign("another-app", stopJoao)); got != 403 {
		t.Errorf("a stop signed by another app: %d, want 403", got)
	}
	stop := metafake.Preference("5511988887777", "stop", at)
	for range 2 { // Meta's retry
		if got := post(stop, metafake.Sign(appSecret, stop)); got != 200 {
			t.Fatalf("a signed stop: %d, want 200", got)
		}
	}
	if got := state(maria); got != "true cancelled 1" {
		t.Errorf("after Meta's stop (twice): %q, want opted out, the goodbye cancelled, one consent event", got)
	}
	if got := state(joao); got != "false pending 0" {
		t.Errorf("the unsigned stop changed joão: %q", got)
	}
	resume := metafake.Preference("5511988887777", "resume", time.Now())
	if got := post(resume, metafake.Sign(appSecret, resume)); got != 200 {
		t.Fatalf("a signed resume: %d, want 200", got)
	}
	if got := state(maria); got != "false cancelled 2" {
		t.Errorf("after Meta's resume: %q, want opted in (the goodbye stays cancelled), two consent events", got)
	}
	if strings.Contains(c.stderr(), "5511988887777") {
		t.Errorf("the console's log carries the user's number")
	}
}

// A prices file the console cannot read is exit 2, one line naming the
// flag, before it listens.
func TestConsoleRefusesABadPricesFile(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	res := cmdtest.Run(t, cmdtest.Build(t, "./cmd/engagement-console"), cmdtest.Env("DATABASE_URL="+url),
		"--listen", "127.0.0.1:0", "--prices-file", "/nonexistent/prices.json")
	if res.Code != 2 || len(cmdtest.Lines(res.Stderr)) != 1 || !strings.Contains(res.Stderr, "--prices-file") {
		t.Errorf("--prices-file missing: exit %d, stderr %q; want 2 and one line naming the flag", res.Code, res.Stderr)
	}
}

// Issue 56, finding 1: Meta resends a webhook late (the console answers
// 503 while its database fails), so an old entry is ordinary traffic. A
// signed stop said at T, then a signed resume said at T - 1 h arriving
// after it, leaves the user opted out: the resume is in the consent log,
// superseded, and changed nothing. A resume said after T still wins.
func TestMetasLateResumeIsSuperseded(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now().Add(-20 * 24 * time.Hour)})
	fixture.SetJID(t, pool, user, fixture.Ptr("5511955554444@s.whatsapp.net"))
	c := startConsole(t, cmdtest.Build(t, "./cmd/engagement-console"), url,
		"--whatsapp-app-secret", appSecret, "--whatsapp-verify-token", verifyToken)
	post := func(body []byte) { postSigned(t, c, body, "a signed preference") }
	log := func() string {
		t.Helper()
		var events []string
		for _, e := range fixture.ConsentEventsOf(t, pool, user) {
			events = append(events, map[bool]string{true: "stop", false: "resume"}[e.OptedOut]+
				map[bool]string{true: "(superseded)", false: ""}[e.Superseded])
		}
		s := strconv.FormatBool(fixture.ProfileOf(t, pool, user).ReengagementOptOut)
		if len(events) > 0 {
			s += " " + strings.Join(events, ",")
		}
		return s
	}
	t0 := time.Now().Add(-2 * time.Minute)
	post(metafake.Preference("5511955554444", "stop", t0))
	late := metafake.Preference("5511955554444", "resume", t0.Add(-time.Hour))
	post(late)
	post(late) // Meta's retry of it
	if got := log(); got != "true stop,resume(superseded)" {
		t.Errorf("a stop at T, then a resume said at T-1h arriving later (twice): %q; want opted out, the resume logged once, superseded", got)
	}
	post(metafake.Preference("5511955554444", "resume", t0.Add(time.Minute)))
	if got := log(); got != "false stop,resume(superseded),resume" {
		t.Errorf("then a resume said after T: %q; want opted back in", got)
	}
}

// postSigned posts body to the console's Meta webhook, signed with the
// app's secret as Meta signs it, and fails the test unless it is answered
// 200; what names the body in the failure.
func postSigned(t *testing.T, c *consoleProc, body []byte, what string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+"/webhooks/whatsapp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", metafake.Sign(appSecret, body))
	res, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d, want 200", what, res.StatusCode)
	}
}
