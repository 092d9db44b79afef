package console_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

const (
	metaSecret = "meta-app-secret"
	metaToken  = "verify-me"
)

// whatsappConsole serves the console with Meta's webhook on, over a fresh
// database with one message the scheduler sent (provider id wamid.OURS).
func whatsappConsole(t *testing.T) (*httptest.Server, *pgxpool.Pool, string) {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	sent := time.Now().Add(-2 * time.Hour)
	id := fixture.Queue(t, pool, fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
		Params: `{"count":"2"}`, JID: "5511999990000@s.whatsapp.net", ScheduledFor: sent, Key: "k1", Status: "sent", SentAt: sent,
		ProviderID: "wamid.OURS"})
	return metaConsole(t, pool), pool, id
}

// metaConsole serves the console over pool with Meta's webhook on.
func metaConsole(t *testing.T, pool *pgxpool.Pool) *httptest.Server {
	t.Helper()
	h, err := console.New(console.Config{Pool: pool, Auth: console.Auth{Users: htpasswd(t), Operators: []string{operator}},
		WhatsApp: console.WhatsAppWebhook{AppSecret: metaSecret, VerifyToken: metaToken},
		Logger:   zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func postMeta(t *testing.T, url string, body []byte, sig string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+console.WhatsAppWebhookPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set("X-Hub-Signature-256", sig)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// Meta's webhook, with a Meta that lies: the handshake with the right and
// a wrong token; unsigned, wrongly signed, oversized and garbage bodies;
// statuses repeated and out of order, a late failure, a status the
// scheduler cannot use. Nothing unsigned changes anything; everything
// signed is acknowledged, so Meta does not resend it for days.
func TestWhatsAppWebhook(t *testing.T) {
	t.Parallel()
	srv, pool, id := whatsappConsole(t)
	state := func() string { return stateUTC(t, pool, id) }
	before := state()

	// The handshake, without the console's credentials.
	for token, want := range map[string]int{metaToken: 200, "guess": 403, "": 403} {
		res, err := http.Get(srv.URL + console.WhatsAppWebhookPath + "?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=" + token)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want || (want == 200 && string(body) != "1158201444") {
			t.Errorf("handshake with token %q: %d %q, want %d (and the challenge on 200)", token, res.StatusCode, body, want)
		}
	}

	// A challenge that is not Meta's (a number) is never echoed.
	res, err := http.Get(srv.URL + console.WhatsAppWebhookPath + "?hub.mode=subscribe&hub.challenge=%3Cscript%3E&hub.verify_token=" + metaToken)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "<script>") {
		t.Errorf("a challenge that is not a number: %d %q, want 400 without it", res.StatusCode, body)
	}

	now := time.Now().Truncate(time.Second)
	delivered := metafake.Statuses(metafake.Status("wamid.OURS", "delivered", now.Add(-time.Hour), ""))
	for name, c := range map[string]struct {
		body []byte
		sig  string
		want int
	}{
		"unsigned":              {delivered, "", http.StatusUnauthorized},
		"signed with another":   {delivered, metafake.Sign("not-the-secret", delivered), http.StatusForbidden},
		"a signature not hex":   {delivered, "sha256=zz", http.StatusForbidden},
		"another scheme":        {delivered, "sha1=" + strings.TrimPrefix(metafake.Sign(metaSecret, delivered), "sha256="), http.StatusForbidden},
		"a body changed":        {append(bytes.Clone(delivered), ' '), metafake.Sign(metaSecret, delivered), http.StatusForbidden},
		"10 MB":                 {bytes.Repeat([]byte("x"), 10<<20), metafake.Sign(metaSecret, bytes.Repeat([]byte("x"), 10<<20)), http.StatusRequestEntityTooLarge},
		"unsigned garbage":      {[]byte("{not json"), "", http.StatusUnauthorized},
		"signed garbage":        {[]byte("{not json"), metafake.Sign(metaSecret, []byte("{not json")), http.StatusOK},
		"signed, none of ours":  {metafake.Statuses(metafake.Status("wamid.NOT-OURS", "read", now, "")), "", 0},
		"signed, a bad status":  {metafake.Statuses(metafake.Status("wamid.OURS", "deleted", now, "")), "", 0},
		"signed, a future time": {metafake.Statuses(metafake.Status("wamid.OURS", "read", now.Add(time.Hour), "")), "", 0},
	} {
		sig, want := c.sig, c.want
		if want == 0 {
			sig, want = metafake.Sign(metaSecret, c.body), http.StatusOK
		}
		if got := postMeta(t, srv.URL, c.body, sig); got != want {
			t.Errorf("%s: %d, want %d", name, got, want)
		}
	}
	if got := state(); got != before {
		t.Fatalf("after the lies the message is %q, want it unchanged, %q", got, before)
	}

	// Read first, then the delivery (reordered), then both again (Meta's
	// retries): delivered at the delivery's time, read at the read's.
	read := metafake.Statuses(metafake.Status("wamid.OURS", "read", now.Add(-30*time.Minute), ""))
	for _, b := range [][]byte{read, delivered, read, delivered} {
		if got := postMeta(t, srv.URL, b, metafake.Sign(metaSecret, b)); got != http.StatusOK {
			t.Fatalf("a signed status: %d, want 200", got)
		}
	}
	want := "sent " + now.Add(-time.Hour).UTC().Format("15:04:05") + " " + now.Add(-30*time.Minute).UTC().Format("15:04:05") + " -"
	if got := stateUTC(t, pool, id); got != want {
		t.Errorf("after read, delivered and their repeats: %q, want %q", got, want)
	}

	// Other paths still need the console's credentials.
	res, err = http.Get(srv.URL + "/queue")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /queue without credentials: %d, want 401", res.StatusCode)
	}
}

// A late failure on the webhook fails the message with WhatsApp's code.
func TestWhatsAppWebhookLateFailure(t *testing.T) {
	t.Parallel()
	srv, pool, id := whatsappConsole(t)
	b := metafake.Statuses(metafake.Status("wamid.OURS", "failed", time.Now().Add(-time.Minute), "131026"))
	if got := postMeta(t, srv.URL, b, metafake.Sign(metaSecret, b)); got != http.StatusOK {
		t.Fatalf("a signed failure: %d, want 200", got)
	}
	m := fixture.MessageByID(t, pool, id)
	if m.ErrorMessage == nil {
		t.Fatalf("after a late failure: %s without an error", m.Status)
	}
	status, msg := m.Status, *m.ErrorMessage
	if status != "failed" || !strings.Contains(msg, "131026") {
		t.Errorf("after a late failure: %s %q, want failed naming 131026", status, msg)
	}
}

func stateUTC(t *testing.T, pool *pgxpool.Pool, id string) string {
	t.Helper()
	m := fixture.MessageByID(t, pool, id)
	clock := func(at *time.Time) string {
		if at == nil {
			return "-"
		}
		return at.UTC().Format("15:04:05")
	}
	return m.Status + " " + clock(m.DeliveredAt) + " " + clock(m.ReadAt) + " " + orDash(m.ErrorMessage)
}

// orDash is *p, or "-" for nil: coalesce(column, '-').
func orDash(p *string) string {
	if p == nil {
		return "-"
	}
	return *p
}

// The queue page says what WhatsApp said of the messages it accepted in
// the last 7 days: delivered and read by their receipts, failed after
// acceptance by code with Meta's meaning.
func TestQueuePageShowsWhatWhatsAppSaid(t *testing.T) {
	t.Parallel()
	srv, pool, _ := whatsappConsole(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	hourAgo := time.Now().Add(-time.Hour)
	fixture.Queue(t, pool, fixture.Message{User: user, Type: "goodbye", CatalogKey: "engagement.goodbye.default",
		JID: "5511999990001@s.whatsapp.net", ScheduledFor: hourAgo, Key: "k2", Status: "sent", SentAt: hourAgo, ProviderID: "wamid.TWO"})
	now := time.Now()
	b := metafake.Statuses(metafake.Status("wamid.OURS", "read", now.Add(-time.Minute), ""), metafake.Status("wamid.TWO", "failed", now.Add(-time.Minute), "131049"))
	if got := postMeta(t, srv.URL, b, metafake.Sign(metaSecret, b)); got != http.StatusOK {
		t.Fatalf("signed statuses: %d, want 200", got)
	}
	var q console.Queue
	_, body := get(t, srv, "/queue", viewer, viewerPassword, true)
	decode(t, body, &q)
	r := q.Receipts
	if r.Accepted != 2 || r.Delivered != 1 || r.Read != 1 || r.FailedLate != 1 || len(r.ByCode) != 1 ||
		r.ByCode[0].Code != "131049" || r.ByCode[0].Messages != 1 || !strings.Contains(r.ByCode[0].Meaning, "marketing") {
		t.Errorf("receipts on the queue page: %+v; want 2 accepted, 1 delivered and read, 1 failed late with 131049 and its meaning", r)
	}
	// Meta's pricing came with both statuses (billable marketing), but
	// Meta bills a message when it is delivered (issue 55): the read one
	// at Brazil's marketing price, the one that failed after acceptance
	// not at all.
	if sp := q.Spend; sp.Accepted != 2 || sp.Delivered != 1 || sp.Billable != 1 || sp.Failed != 1 || sp.USD != 0.0625 ||
		len(sp.Categories) != 1 || sp.Categories[0].Category != "marketing" {
		t.Errorf("spend on the queue page: %+v; want 1 billed as marketing, US$0.0625, and the late failure not billed", sp)
	}
	_, html := get(t, srv, "/queue", viewer, viewerPassword, false)
	for _, want := range []string{"What WhatsApp said", "failed after acceptance", "131049", "Meta&#39;s limit on marketing messages",
		"Spend, last 30 days", "US$0.06", "failed after acceptance", "never delivered: not billed"} {
		if !strings.Contains(html, want) {
			t.Errorf("the queue page lacks %q", want)
		}
	}
}

// BenchmarkWhatsAppWebhook is Meta's webhook's throughput: signed bodies of
// one status each (a delivered receipt for one of 10,000 sent messages),
// posted by 8 clients at once to the console over HTTP, signatures
// checked; statuses per second. Meta sends at most 80 messages a second a
// number by default, each with up to three statuses.
func BenchmarkWhatsAppWebhook(b *testing.B) {
	pool, _ := pgtest.NewPool(b)
	user := fixture.User(b, pool, fixture.UserOptions{LastActivity: time.Now()})
	const messages = 10_000
	fixture.ConsoleSentMessages(b, pool, user, messages, fixture.Now(b, pool).Add(-24*time.Hour))
	fixture.VacuumQueue(b, pool)
	h, err := console.New(console.Config{Pool: pool, Auth: console.Auth{Users: htpasswd(b), Operators: []string{operator}},
		WhatsApp: console.WhatsAppWebhook{AppSecret: metaSecret, VerifyToken: metaToken}, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	at := time.Now().Add(-time.Hour)
	bodies := make([][]byte, messages)
	for i := range bodies {
		bodies[i] = metafake.Statuses(metafake.Status(fmt.Sprint("wamid.", i+1), "delivered", at, ""))
	}
	var total time.Duration
	posted := 0
	for b.Loop() {
		t0 := time.Now()
		var wg sync.WaitGroup
		for c := range 8 {
			wg.Go(func() {
				for i := c; i < messages; i += 8 {
					req, _ := http.NewRequest(http.MethodPost, srv.URL+console.WhatsAppWebhookPath, bytes.NewReader(bodies[i]))
					req.Header.Set("X-Hub-Signature-256", metafake.Sign(metaSecret, bodies[i]))
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						b.Errorf("status %d", res.StatusCode)
						return
					}
				}
			})
		}
		wg.Wait()
		total += time.Since(t0)
		posted += messages
	}
	b.ReportMetric(float64(posted)/total.Seconds(), "statuses/s")
}

// Meta's pricing on a signed status is kept on the message (the latest
// Meta says); an unsigned one changes nothing, and a status without
// pricing leaves what Meta said before.
func TestWhatsAppWebhookKeepsMetaPricing(t *testing.T) {
	t.Parallel()
	srv, pool, id := whatsappConsole(t)
	pricing := func() string {
		m := fixture.QueueRowByProvider(t, pool, "wamid.OURS") // message id, the one whatsappConsole queued
		if m.ID != id {
			t.Fatalf("wamid.OURS is message %s, want %s", m.ID, id)
		}
		billable := "-"
		if m.Billable != nil {
			billable = strconv.FormatBool(*m.Billable)
		}
		return billable + " " + orDash(m.PricingCategory)
	}
	now := time.Now()
	utility := metafake.Statuses(strings.Replace(metafake.Status("wamid.OURS", "sent", now.Add(-time.Hour), ""),
		`"billable":true,"pricing_model":"PMP","category":"marketing"`, `"billable":false,"pricing_model":"PMP","category":"utility"`, 1))
	if got := postMeta(t, srv.URL, utility, ""); got != http.StatusUnauthorized {
		t.Fatalf("unsigned: %d, want 401", got)
	}
	if got := postMeta(t, srv.URL, utility, metafake.Sign("not-the-secret", utility)); got != http.StatusForbidden {
		t.Fatalf("wrongly signed: %d, want 403", got)
	}
	if got := pricing(); got != "- -" {
		t.Fatalf("after unsigned pricing: %q, want nothing kept", got)
	}
	if got := postMeta(t, srv.URL, utility, metafake.Sign(metaSecret, utility)); got != http.StatusOK {
		t.Fatalf("signed: %d, want 200", got)
	}
	if got := pricing(); got != "false utility" {
		t.Errorf("after a signed utility status: %q, want %q", got, "false utility")
	}
	delivered := metafake.Statuses(metafake.Status("wamid.OURS", "delivered", now.Add(-30*time.Minute), ""))
	if got := postMeta(t, srv.URL, delivered, metafake.Sign(metaSecret, delivered)); got != http.StatusOK {
		t.Fatalf("signed: %d, want 200", got)
	}
	if got := pricing(); got != "true marketing" {
		t.Errorf("after a signed marketing delivery: %q, want the latest Meta said, %q", got, "true marketing")
	}
	bare := metafake.Statuses(fmt.Sprintf(`{"id":"wamid.OURS","status":"read","timestamp":"%d","recipient_id":"5511999990000"}`, now.Unix()))
	if got := postMeta(t, srv.URL, bare, metafake.Sign(metaSecret, bare)); got != http.StatusOK {
		t.Fatalf("signed: %d, want 200", got)
	}
	if got := pricing(); got != "true marketing" {
		t.Errorf("after a status without pricing: %q, want it unchanged", got)
	}
	if got := stateUTC(t, pool, id); !strings.HasPrefix(got, "sent ") || strings.Contains(got, " - -") {
		t.Errorf("the receipts of the same requests: %q, want delivered and read", got)
	}
}
