package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/pricing"
)

// Issue 43: engagementctl status prices the last 30 days' messages from
// --prices-file (ENGAGEMENT_PRICES_FILE) when given, the shipped prices
// otherwise; a file that cannot be read is exit 2, one line, before any
// work.
func TestStatusPricesFile(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	// Four goodbyes the Cloud API sent (the send ledger says so), delivered.
	fixture.Exec(t, pool, `
		WITH m AS (
		    INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		           destination_jid, scheduled_for, idempotency_key, status, sent_at, delivered_at)
		    SELECT $1::uuid, 'goodbye', 'engagement.goodbye.default', '{}', 'individual', '5511900000' || g || '@s.whatsapp.net',
		           now() - interval '1 day', $1::uuid::text || ':' || g, 'sent', now() - interval '1 day', now() - interval '1 day'
		      FROM generate_series(1, 4) g
		    RETURNING id)
		INSERT INTO engagement_processed_messages (message_id, transport, status, attempts)
		SELECT id, $2, 'sent', 1 FROM m`, user, pricing.MetaTransport)
	dir := t.TempDir()
	prices := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(prices, []byte(`{"as_of": "2026-11-01", "source": "our contract", "default_country": "BR",
		"countries": {"BR": {"calling_code": "55", "prices": {"marketing": 0.5}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	spend := func(env []string, args ...string) float64 {
		t.Helper()
		res := cmdtest.Exec(t, ctl.NewCommand, env, append([]string{"status", "--output", "json"}, args...)...)
		var st struct {
			Spend struct {
				USD      float64 `json:"usd"`
				Billable int64   `json:"billable"`
			} `json:"spend"`
		}
		if err := json.Unmarshal([]byte(res.Stdout), &st); res.Code != 0 || err != nil || st.Spend.Billable != 4 {
			t.Fatalf("status %v: exit %d, %v, %+v; want 4 billable: %s", args, res.Code, err, st.Spend, res.Stderr)
		}
		return st.Spend.USD
	}
	env := cmdtest.Env("DATABASE_URL=" + url)
	if got := spend(env); got != 4*0.0625 {
		t.Errorf("with the shipped prices: US$%v, want %v", got, 4*0.0625)
	}
	if got := spend(env, "--prices-file", prices); got != 2 {
		t.Errorf("with --prices-file: US$%v, want 2", got)
	}
	if got := spend(cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_PRICES_FILE="+prices)); got != 2 {
		t.Errorf("with ENGAGEMENT_PRICES_FILE: US$%v, want 2", got)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"countries": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{bad, filepath.Join(dir, "missing.json")} {
		res := cmdtest.Exec(t, ctl.NewCommand, env, "status", "--prices-file", f)
		if res.Code != 2 || len(cmdtest.Lines(res.Stderr)) != 1 || !strings.Contains(res.Stderr, "--prices-file") {
			t.Errorf("status --prices-file %s: exit %d, stderr %q; want 2 and one line naming the flag", filepath.Base(f), res.Code, res.Stderr)
		}
	}
}
