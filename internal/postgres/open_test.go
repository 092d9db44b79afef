package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// withQuery returns dbURL with the query parameters in kv (name, value, …) set.
func withQuery(t *testing.T, dbURL string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// TestOpenSetsNameAndTimeouts: a session opened by Open is named after the
// binary, as the server sees it, and carries no statement_timeout setting
// (the client applies it, see TestStatementTimeout); settings the URL makes
// win.
func TestOpenSetsNameAndTimeouts(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	tests := []struct {
		name                 string
		url                  string
		wantApp, wantTimeout string
	}{
		{"defaults", dbURL, "engagement-test", "0"},
		{"the URL's own", withQuery(t, dbURL, "application_name", "nightly-rerun", "statement_timeout", "1500"), "nightly-rerun", "0"},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		pool, err := postgres.Open(ctx, tt.url, "engagement-test")
		if err != nil {
			cancel()
			t.Fatalf("%s: Open: %v", tt.name, err)
		}
		app, timeout := fixture.Setting(t, pool, "application_name"), fixture.Setting(t, pool, "statement_timeout")
		pool.Close()
		cancel()
		if app != tt.wantApp || timeout != tt.wantTimeout {
			t.Errorf("%s: application_name %q, statement_timeout %q; want %q, %q", tt.name, app, timeout, tt.wantApp, tt.wantTimeout)
		}
	}
}

func TestParseConfigTimeoutsTLSAndPoolSize(t *testing.T) {
	t.Parallel()
	cfg, err := postgres.ParseConfig("postgres://jobs:pw@db.example.internal:5432/engagement?sslmode=verify-full", "engagement-daily")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ConnConfig.ConnectTimeout; got != postgres.DefaultConnectTimeout {
		t.Errorf("connect timeout %v, want the default %v", got, postgres.DefaultConnectTimeout)
	}
	if tls := cfg.ConnConfig.TLSConfig; tls == nil || tls.InsecureSkipVerify || tls.ServerName != "db.example.internal" {
		t.Errorf("sslmode=verify-full: TLS config %+v, want certificate and host name verified for db.example.internal", tls)
	}
	if len(cfg.ConnConfig.Fallbacks) != 0 {
		t.Errorf("sslmode=verify-full has %d fallbacks, want none (no plaintext retry)", len(cfg.ConnConfig.Fallbacks))
	}
	if cfg.MaxConns != postgres.MaxConns {
		t.Errorf("MaxConns %d, want %d whatever the client's CPUs", cfg.MaxConns, postgres.MaxConns)
	}

	cfg, err = postgres.ParseConfig("postgres://jobs@db/engagement?connect_timeout=3&pool_max_conns=50", "engagement-daily")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ConnConfig.ConnectTimeout; got != 3*time.Second {
		t.Errorf("connect_timeout=3: connect timeout %v, want 3s", got)
	}
	if cfg.MaxConns != 8 {
		t.Errorf("pool_max_conns=50: MaxConns %d, want the cap of 8", cfg.MaxConns)
	}

	cfg, err = postgres.ParseConfig("postgres://jobs@db/engagement?pool_max_conns=2", "engagement-daily")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxConns != 2 {
		t.Errorf("pool_max_conns=2: MaxConns %d, want 2", cfg.MaxConns)
	}
}

// TestConnectTimeoutFromTheContext: the connect timeout of a URL without
// connect_timeout is DefaultConnectTimeout unless the context carries
// another (WithConnectTimeout, which tests use not to wait out 10 s); a
// non-positive one leaves the default.
func TestConnectTimeoutFromTheContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if got := postgres.ConnectTimeout(ctx); got != postgres.DefaultConnectTimeout {
		t.Errorf("ConnectTimeout of a bare context = %v, want the default %v", got, postgres.DefaultConnectTimeout)
	}
	if got := postgres.ConnectTimeout(postgres.WithConnectTimeout(ctx, 1500*time.Millisecond)); got != 1500*time.Millisecond {
		t.Errorf("ConnectTimeout after WithConnectTimeout(1.5s) = %v, want 1.5s", got)
	}
	if got := postgres.ConnectTimeout(postgres.WithConnectTimeout(ctx, 0)); got != postgres.DefaultConnectTimeout {
		t.Errorf("ConnectTimeout after WithConnectTimeout(0) = %v, want the default %v", got, postgres.DefaultConnectTimeout)
	}
}
