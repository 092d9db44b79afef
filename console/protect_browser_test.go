package console_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// protectedQueue runs queue-process (its command, as the binary builds it)
// on the Cloud API against a fake Graph API that rates the number YELLOW
// at TIER_2K, with the kind priority, a per-user cap, jitter and a spread
// budget; then Meta's webhook, on the console the test serves, pauses the
// goodbye's template. It returns the console and its pool.
func protectedQueue(t *testing.T) (*httptest.Server, *pgxpool.Pool) {
	t.Helper()
	pool, url := pgtest.NewPool(t)
	g := metafake.NewGraph(t)
	g.SetNumber(metafake.PhoneNumber("YELLOW", "TIER_2K", "CONNECTED"))
	templates := filepath.Join(t.TempDir(), "templates.json")
	if err := os.WriteFile(templates, []byte(`{
		"engagement.goodbye.self_select":{"name":"goodbye_v1","language":{"pt-BR":"pt_BR"}},
		"engagement.weekly_review.celebration":{"name":"weekly_review_v1","language":{"pt-BR":"pt_BR"},"params":["count"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := cmdtest.Env("DATABASE_URL="+url, "WHATSAPP_PHONE_NUMBER_ID="+g.PhoneNumberID, "WHATSAPP_ACCESS_TOKEN=tok",
		"WHATSAPP_TEMPLATES="+templates, "WHATSAPP_BASE_URL="+g.Server.URL)
	res := cmdtest.Exec(t, queuecmd.NewCommand, env, "--transport", "whatsapp-cloud", "--daily-limit", "auto",
		"--kind-priority", "goodbye,reminder", "--per-user-cap", "1", "--per-user-cap-window", "168h",
		"--send-interval", "10s", "--send-jitter", "5s", "--spread-budget",
		"--quiet-hours", "21:00-08:00", "--timezone", "America/Sao_Paulo", "--output", "json")
	if res.Code != 0 {
		t.Fatalf("queue-process: exit %d, stderr %s", res.Code, res.Stderr)
	}
	srv := metaConsole(t, pool)
	for _, b := range [][]byte{
		metafake.TemplateStatus("goodbye_v1", "PAUSED", time.Now()),
		metafake.TemplateStatus("weekly_review_v1", "APPROVED", time.Now()),
	} {
		if got := postMeta(t, srv.URL, b, metafake.Sign(metaSecret, b)); got != 200 {
			t.Fatalf("Meta's webhook: %d, want 200", got)
		}
	}
	return srv, pool
}

// The queue page shows at a glance what queue-process runs with (the
// order, the per-user cap, the pace) and the number's health (rating,
// tier, paused templates, when last read), all from the database: what
// the run recorded and Meta's webhook wrote. Its JSON carries the same.
func TestOrderCapPaceAndTheNumbersHealthInTheBrowser(t *testing.T) {
	t.Parallel()
	srv, _ := protectedQueue(t)

	var q struct {
		Settings []struct {
			Transport    string   `json:"transport"`
			KindPriority []string `json:"kind_priority"`
			PerUserCap   int      `json:"per_user_cap"`
			Window       float64  `json:"per_user_cap_window_seconds"`
			Interval     float64  `json:"send_interval_seconds"`
			LeastGap     float64  `json:"least_gap_seconds"`
			Jitter       float64  `json:"send_jitter_seconds"`
			Spread       bool     `json:"spread_budget"`
			DailyLimit   int      `json:"daily_limit"`
			Auto         bool     `json:"daily_limit_auto"`
		} `json:"queue_settings"`
		Numbers []struct {
			Transport string     `json:"transport"`
			Rating    string     `json:"quality_rating"`
			Tier      string     `json:"messaging_limit_tier"`
			ReadAt    *time.Time `json:"read_at"`
			Source    string     `json:"source"`
			Paused    []string   `json:"paused_templates"`
		} `json:"number_health"`
	}
	_, body := get(t, srv, "/queue", operator, operatorPassword, true)
	decode(t, body, &q)
	if len(q.Settings) != 1 {
		t.Fatalf("queue_settings %+v, want the whatsapp run's", q.Settings)
	}
	s := q.Settings[0]
	// 13 waking hours over 2,000 a day is 23.4 s on average: 20.9 s at
	// least, plus up to 5 s; above the 10 s floor.
	if s.Transport != "whatsapp" || strings.Join(s.KindPriority, ",") != "goodbye,reminder" || s.PerUserCap != 1 ||
		s.Window != 168*3600 || s.Interval != 10 || s.LeastGap < 20.8 || s.LeastGap > 21 || s.Jitter != 5 || !s.Spread ||
		s.DailyLimit != 2000 || !s.Auto {
		t.Errorf("queue_settings %+v, want what the run ran with", s)
	}
	if len(q.Numbers) != 1 || q.Numbers[0].Rating != "YELLOW" || q.Numbers[0].Tier != "TIER_2K" || q.Numbers[0].ReadAt == nil ||
		q.Numbers[0].Source != "graph_api" || strings.Join(q.Numbers[0].Paused, ",") != "goodbye_v1" {
		t.Errorf("number_health %+v, want YELLOW at TIER_2K read from the Graph API, goodbye_v1 paused", q.Numbers)
	}

	ctx := browse(t, operator, operatorPassword)
	browsertest.Run(t, ctx, chromedp.Navigate(srv.URL+"/queue"), chromedp.WaitVisible("footer"))
	text, err := chromedp.Run(ctx, chromedp.Text("main"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Order, cap and pace",
		"goodbye, reminder, then the rest; oldest due first within each; one queued 3 days ago goes first whatever its kind",
		"at most 1 marketing message per user in any 7 days",
		"a send every 20.9 s at least, plus up to 5 s at random; the day's budget spread over the 13 h of waking hours, never below --send-interval 10 s",
		"(auto: Meta's tier)",
		"The number's health", "YELLOW", "TIER_2K", "users a day", "paused templates", "goodbye_v1",
		"from the Graph API (a queue-process run)", "PAUSED its messages wait", "weekly_review_v1", "APPROVED",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the queue page does not show %q:\n%s", want, text)
		}
	}
	level, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.number-health .card').className`))
	if err != nil || !strings.Contains(level, "health-amber") {
		t.Errorf("the rating's card is %q (%v), want amber (YELLOW, a paused template)", level, err)
	}
	browsertest.Run(t, ctx, chromedp.ScrollIntoView("#order-cap-pace"))
	browsertest.Shot(t, ctx, "queue-protect.png")
	browsertest.RequireNoErrors(t, ctx)
}
