package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 24, point 2: the test cluster's log held 432 "SET LOCAL can only be
// used in transaction blocks" WARNINGs from the binaries, whose settings
// never applied, and nothing in the binaries' own logs said so. A WARNING
// the server sends now becomes one log line (which the test kit fails any
// test on); a NOTICE does not.
func TestAServerWarningIsALogLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	ctx := zerolog.New(&buf).WithContext(context.Background())
	pool, err := postgres.Open(ctx, pgtest.NewDatabase(t), "notice-test")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	fixture.PgNotice(t, pool)
	if buf.Len() != 0 {
		t.Errorf("a NOTICE was logged: %s", buf.String())
	}
	fixture.PgWarning(t, pool) // SET LOCAL outside a transaction block
	var line struct {
		Level, Message, Sqlstate, Notice string
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v; want one JSON line", buf.String(), err)
	}
	if line.Level != "warn" || line.Message != postgres.WarningMessage || line.Sqlstate != "25P01" || line.Notice == "" {
		t.Errorf("log line %+v, want a warn line %q with SQLSTATE 25P01 and the server's words", line, postgres.WarningMessage)
	}
}
