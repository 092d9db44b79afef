package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/syncbuf"
)

// asOf is the bot's rows' clock in the bot-schema case.
var asOf = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

// TestConfirmRequeueAndCancelThroughTheBinary is what an operator does:
// the shipped engagement-console, a requeue and a cancel, each previewed
// and confirmed through HTML forms, on the project's own database, on the
// bot's adopted one and through PgBouncer in transaction mode. The
// console's handler tests once ran on a pool the binary does not build,
// and every Confirm answered 500 in the binary (the audit's filter went as
// bytea in exec mode).
func TestConfirmRequeueAndCancelThroughTheBinary(t *testing.T) {
	ctl := cmdtest.Build(t, "./cmd/engagementctl")
	console := cmdtest.Build(t, "./cmd/engagement-console")

	migrated := func(t *testing.T, url string) string {
		t.Helper()
		res := cmdtest.Run(t, ctl, cmdtest.Env("DATABASE_URL="+url), "migrate", "up")
		if res.Code != 0 {
			t.Fatalf("engagementctl migrate up: exit %d: %s", res.Code, res.Stderr)
		}
		return url
	}
	for _, tc := range []struct {
		name string
		// db returns the database's direct URL (for the fixture and the
		// checks) and the URL the console is given.
		db func(t *testing.T) (direct, served string)
	}{
		{"empty project database", func(t *testing.T) (string, string) {
			url := migrated(t, pgtest.NewEmptyDatabase(t))
			return url, url
		}},
		{"the bot's database", func(t *testing.T) (string, string) {
			url := migrated(t, botdb.NewDatabaseWithRows(t, asOf))
			return url, url
		}},
		{"through PgBouncer in transaction mode", func(t *testing.T) (string, string) {
			return pgtest.NewPooledDatabase(t)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			direct, served := tc.db(t)
			failed, pending := seedQueue(t, direct)
			c := startConsole(t, console, served)

			form := url.Values{"status": {"failed"}, "ids": {strings.Join(failed, " ")}}
			preview := c.submit(t, "/actions/requeue/preview", form)
			if !strings.Contains(preview, fmt.Sprintf("<strong>%d</strong> messages", len(failed))) {
				t.Errorf("requeue preview does not say %d messages:\n%s", len(failed), excerpt(preview))
			}
			done := c.submit(t, "/actions/requeue/confirm", form)
			if !strings.Contains(done, fmt.Sprintf("Requeued %d messages", len(failed))) {
				t.Errorf("requeue confirmation does not say it requeued %d:\n%s", len(failed), excerpt(done))
			}

			form = url.Values{"ids": {strings.Join(pending, " ")}}
			c.submit(t, "/actions/cancel/preview", form)
			done = c.submit(t, "/actions/cancel/confirm", form)
			if !strings.Contains(done, fmt.Sprintf("Cancelled %d messages", len(pending))) {
				t.Errorf("cancel confirmation does not say it cancelled %d:\n%s", len(pending), excerpt(done))
			}

			// The enqueue API writes its audit row the same way: a new
			// message (201), then its key again (200, the same message).
			body := `{"user_id":"6c1f2a7e-0000-4000-8000-00000000c001","type":"weekly_review",` +
				`"key":"engagement.weekly_review.celebration","params":{"count":"3"},"idempotency_key":"e2e-1"}`
			var ids []string
			for _, want := range []int{http.StatusCreated, http.StatusOK} {
				status, answer := c.api(t, body)
				var msg struct{ ID string }
				if err := json.Unmarshal([]byte(answer), &msg); status != want || err != nil || msg.ID == "" {
					t.Fatalf("POST /api/messages: %d %s, want %d with the message", status, answer, want)
				}
				ids = append(ids, msg.ID)
			}
			if ids[0] != ids[1] {
				t.Errorf("the replay answered message %s, the first call %s", ids[1], ids[0])
			}

			statuses := queueStatuses(t, direct)
			for _, id := range failed {
				if statuses[id] != "pending" {
					t.Errorf("requeued message %s is %q, want pending", id, statuses[id])
				}
			}
			for _, id := range pending {
				if statuses[id] != "cancelled" {
					t.Errorf("cancelled message %s is %q, want cancelled", id, statuses[id])
				}
			}
			audit := auditRows(t, direct)
			want := []string{fmt.Sprintf("requeue by ops: %d", len(failed)), fmt.Sprintf("cancel by ops: %d", len(pending)), "enqueue by ops: 1"}
			if strings.Join(audit, "; ") != strings.Join(want, "; ") {
				t.Errorf("audit rows %q, want %q", audit, want)
			}
			if strings.Contains(c.stderr(), `"level":"error"`) {
				t.Errorf("the console logged an error:\n%s", c.stderr())
			}
		})
	}
}

// seedQueue puts two users in the database, each with a failed goodbye and
// a pending weekly review, and returns the failed and the pending ids.
func seedQueue(t *testing.T, url string) (failed, pending []string) {
	t.Helper()
	conn := connect(t, url)
	botUsers := fixture.TableExists(t, conn, "public.users")
	for i, id := range []string{"6c1f2a7e-0000-4000-8000-00000000c001", "6c1f2a7e-0000-4000-8000-00000000c002"} {
		if botUsers {
			fixture.ConsoleBotUser(t, conn, id)
		}
		jid := fmt.Sprintf("55119%08d@s.whatsapp.net", 7000+i)
		fixture.ConsoleBareProfile(t, conn, id, jid)
		f := fixture.Queue(t, conn, fixture.Message{User: id, Type: "goodbye", CatalogKey: "engagement.goodbye.self_select", JID: jid,
			ScheduledFor: time.Now().Add(-24 * time.Hour), Status: "failed", RetryCount: 3, Error: "webhook: receiver answered 502 Bad Gateway"})
		p := fixture.Queue(t, conn, fixture.Message{User: id, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
			Params: `{"count": "2"}`, JID: jid, ScheduledFor: time.Now().Add(24 * time.Hour)})
		failed, pending = append(failed, f), append(pending, p)
	}
	return failed, pending
}

// connect opens a connection of the test's own to url, closed at cleanup.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func queueStatuses(t *testing.T, url string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, m := range fixture.QueueRows(t, connect(t, url)) {
		got[m.ID] = m.Status
	}
	return got
}

// auditRows are the console's audit rows as "action by actor: messages",
// checking that each filter is a JSON object.
func auditRows(t *testing.T, url string) []string {
	t.Helper()
	var got []string
	for _, e := range fixture.ConsoleAudit(t, connect(t, url)) {
		if kind := e.FilterKind(); kind != "object" {
			t.Errorf("audit row %s: filter is a JSON %s, want an object", e.Action, kind)
		}
		got = append(got, fmt.Sprintf("%s by %s: %d", e.Action, e.Actor, e.Messages))
	}
	return got
}

// consoleProc is a running engagement-console with an operator, ops.
type consoleProc struct {
	base   string
	client *http.Client
	errBuf *syncbuf.Buffer
}

const opsPassword = "ops-password"

// htpasswdFile writes an htpasswd file holding ops, with opsPassword
// hashed at bcrypt cost, and returns its path.
func htpasswdFile(t *testing.T, cost int) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(opsPassword), cost)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(file, []byte("ops:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// freePort is a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func startConsole(t *testing.T, bin, dbURL string, extra ...string) *consoleProc {
	t.Helper()
	file := htpasswdFile(t, bcrypt.MinCost)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd, _, _ := cmdtest.Command(bin, cmdtest.Env("DATABASE_URL="+dbURL),
		append([]string{"--listen", addr, "--htpasswd", file, "--operators", "ops", "--log-format", "json"}, extra...)...)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() //nolint:errcheck // the exit is checked through exited
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) //nolint:errcheck // it may have exited
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill() //nolint:errcheck // a console that does not stop is the failure reported
			t.Errorf("the console did not stop within 30 s of SIGINT")
		}
	})
	c := &consoleProc{base: "http://" + addr, client: &http.Client{Timeout: time.Minute}, errBuf: stderr}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-exited:
			t.Fatalf("the console exited before serving: %s", stderr)
		default:
		}
		if resp, err := c.client.Get(c.base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console did not answer /healthz within a minute: %s", stderr)
		}
		time.Sleep(50 * time.Millisecond) // polling a starting server, not timing a test
	}
}

func (c *consoleProc) stderr() string { return c.errBuf.String() }

// waitLogged returns the console's log once it holds want, or as it is
// after 10 s (the caller's checks then say what is missing): a line the
// console wrote reaches the test through a pipe, a moment later.
func (c *consoleProc) waitLogged(t *testing.T, want string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		logs := c.stderr()
		if strings.Contains(logs, want) || time.Now().After(deadline) {
			return logs
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// submit posts form to path as a browser's form would (with the page's
// CSRF token, accepting HTML) and returns the page it answers; anything
// but 200 fails the test.
func (c *consoleProc) submit(t *testing.T, path string, form url.Values) string {
	t.Helper()
	form = cloneValues(form)
	form.Set("csrf", c.csrfToken(t))
	req, err := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "text/html")
	req.SetBasicAuth("ops", opsPassword)
	status, body := c.do(t, req)
	if status != http.StatusOK {
		t.Fatalf("POST %s: %d\n%s\nconsole log:\n%s", path, status, excerpt(body), c.stderr())
	}
	return body
}

// api posts body to POST /api/messages as ops, as JSON, and returns the
// status and the answer.
func (c *consoleProc) api(t *testing.T, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+"/api/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth("ops", opsPassword)
	return c.do(t, req)
}

func (c *consoleProc) csrfToken(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+"/queue", nil)
	req.SetBasicAuth("ops", opsPassword)
	req.Header.Set("Accept", "text/html")
	status, body := c.do(t, req)
	const marker = `<meta name="csrf-token" content="`
	i := strings.Index(body, marker)
	if status != http.StatusOK || i < 0 {
		t.Fatalf("GET /queue: %d, no CSRF token:\n%s", status, excerpt(body))
	}
	rest := body[i+len(marker):]
	return rest[:strings.Index(rest, `"`)]
}

func (c *consoleProc) do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// excerpt is the text of an HTML page without its head, short enough for
// a failure message.
func excerpt(body string) string {
	if i := strings.Index(body, "<main"); i >= 0 {
		body = body[i:]
	}
	if len(body) > 1500 {
		body = body[:1500]
	}
	return body
}
