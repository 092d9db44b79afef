// Package botdb gives tests the bot's own database, as the scheduler finds
// it on its first deploy: the tables, indexes, roles, default privileges
// and row level security that the bot's migrations created on Supabase
// (testdata/bot-schema.sql, a copy of ../shared/bot-schema.sql kept in step
// by TestSchemaIsTheSharedOne), and the rows its earlier scheduler left
// (testdata/bot-rows.sql). Nothing of the scheduler's is applied: tests
// run `engagementctl migrate up` on it themselves.
package botdb

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

var (
	//go:embed testdata/bot-schema.sql
	Schema string
	//go:embed testdata/bot-rows.sql
	rows string
)

// The users of testdata/bot-rows.sql, by what they are.
const (
	ActiveRecent      = "00000000-0000-4000-8000-000000000001"
	Silent20Days      = "00000000-0000-4000-8000-000000000002"
	NoActivityOld     = "00000000-0000-4000-8000-000000000003"
	NoActivityNew     = "00000000-0000-4000-8000-000000000004"
	NullProfile       = "00000000-0000-4000-8000-000000000005"
	OldPendingGoodbye = "00000000-0000-4000-8000-000000000006"
	OldSentGoodbye    = "00000000-0000-4000-8000-000000000007"
	ReminderDue       = "00000000-0000-4000-8000-000000000008"
	Dormant           = "00000000-0000-4000-8000-000000000009"
	OptedOut          = "00000000-0000-4000-8000-000000000010"
	ReviewedThisWeek  = "00000000-0000-4000-8000-000000000011"
	FailedOldReview   = "00000000-0000-4000-8000-000000000012"
)

// Tables are the bot's tables, in the order they were created.
var Tables = []string{"users", "user_profiles", "user_engagement_states", "transactions", "engagement_message_queue"}

// NewDatabase creates a database holding the bot's schema and nothing
// else, for one test, dropped when it ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return pgtest.NewDatabaseFrom(t, "bot-schema\n"+Schema, func(ctx context.Context, url string) error {
		return exec(ctx, url, Schema)
	})
}

// NewSupabaseDatabase creates a database holding only what every Supabase
// project has before the bot's tables (the Data API roles, their default
// privileges on public, uuid-ossp), for one test, dropped when it ends.
func NewSupabaseDatabase(t testing.TB) string {
	t.Helper()
	preamble, _, ok := strings.Cut(Schema, "-- The bot's users.")
	if !ok {
		t.Fatal("botdb: testdata/bot-schema.sql no longer has the line \"-- The bot's users.\" that ends Supabase's part")
	}
	return pgtest.NewDatabaseFrom(t, "supabase\n"+preamble, func(ctx context.Context, url string) error {
		return exec(ctx, url, preamble)
	})
}

// NewDatabaseWithRows is NewDatabase with the old scheduler's rows in it,
// relative to asOf.
func NewDatabaseWithRows(t testing.TB, asOf time.Time) string {
	t.Helper()
	url := NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := exec(ctx, url, Rows(asOf)); err != nil {
		t.Fatalf("botdb: insert the bot's rows: %v", err)
	}
	return url
}

// Rows is testdata/bot-rows.sql with its psql variable as_of set.
func Rows(asOf time.Time) string {
	return strings.ReplaceAll(rows, ":'as_of'", "'"+asOf.UTC().Format(time.RFC3339Nano)+"'")
}

func exec(ctx context.Context, url, script string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, script, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("apply the bot's script: %w", err)
	}
	return nil
}
