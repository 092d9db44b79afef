package migrations_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/migrations"
)

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

func up(t *testing.T, url string) error {
	t.Helper()
	m, err := migrations.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return m.Up()
}

// catalog is every object of the database's public schema with its
// definition: tables, columns, indexes, constraints, functions, policies,
// row level security and grants.
func catalog(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	return fixture.MigrationsCatalog(t, conn)
}

// TestUpAdoptsTheBotsDatabase: issue 30 saw `engagementctl migrate up` on
// the bot's database exit 1 with "relation "user_profiles" already exists
// (SQLSTATE 42P07)". On the bot's schema with its rows, Up now succeeds,
// changes none of the bot's rows or definitions, records the schema
// version, builds the scheduler's indexes valid, and a second Up changes
// nothing at all.
func TestUpAdoptsTheBotsDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := botdb.NewDatabaseWithRows(t, time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	conn := connect(t, url)
	before, err := botdb.Take(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}

	if err := up(t, url); err != nil {
		t.Fatalf("Up on the bot's database: %v", err)
	}
	if err := migrations.Check(ctx, conn); err != nil {
		t.Errorf("Check after Up = %v, want nil: the jobs' version check must pass", err)
	}
	changes, err := before.Changes(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		t.Errorf("the bot's %s", c)
	}

	adopted := fixture.MigrationsAdoptedTables(t, conn)
	if want := []string{"engagement_message_queue", "transactions", "user_engagement_states", "user_profiles"}; !slices.Equal(adopted, want) {
		t.Errorf("engagement_adopted_tables = %v, want %v", adopted, want)
	}
	// What the scheduler added: nullable columns, and its indexes, valid.
	added := fixture.MigrationsAddedColumns(t, conn)
	for _, a := range added {
		if strings.HasSuffix(a, "NOT NULL") {
			t.Errorf("added column %s: want it nullable", a)
		}
	}
	if !slices.Contains(added, "user_profiles.group_jid") || !slices.Contains(added, "engagement_message_queue.claimed_by") {
		t.Errorf("added columns = %v, want user_profiles.group_jid and engagement_message_queue.claimed_by among them", added)
	}
	for _, idx := range []string{"user_engagement_states_state_last_activity_idx", "user_engagement_states_goodbye_expires_idx",
		"user_engagement_states_remind_at_idx", "transactions_user_created_idx", "transactions_created_at_idx",
		"engagement_message_queue_pending_idx", "engagement_message_queue_processing_idx"} {
		if valid, exists := fixture.MigrationsIndexValid(t, conn, idx); !valid {
			t.Errorf("index %s: valid %v (exists %v), want a valid index", idx, valid, exists)
		}
	}
	// The bot's unique key serves ON CONFLICT: no second copy of it.
	if n := fixture.MigrationsUniqueOnKey(t, conn); n != 2 {
		t.Errorf("unique indexes on the queue's idempotency_key: %d, want the bot's 2 and no more", n)
	}

	first := catalog(t, conn)
	if err := up(t, url); err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if second := catalog(t, conn); !slices.Equal(first, second) {
		t.Errorf("the second Up changed the schema:\nbefore %v\nafter  %v", first, second)
	}
}

// TestDownNeverDropsTheBotsTables: rolling every migration back on the
// bot's database removes what the scheduler added and keeps the bot's
// tables, rows and definitions as they were.
func TestDownNeverDropsTheBotsTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := botdb.NewDatabaseWithRows(t, time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	conn := connect(t, url)
	pristine := catalog(t, conn)
	before, err := botdb.Take(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := up(t, url); err != nil {
		t.Fatal(err)
	}
	m, err := migrations.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.DownAll(); err != nil {
		t.Fatalf("DownAll: %v", err)
	}
	changes, err := before.Changes(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		t.Errorf("the bot's %s", c)
	}
	var left []string
	for _, o := range catalog(t, conn) {
		if !slices.Contains(pristine, o) && !strings.Contains(o, migrations.Table) {
			left = append(left, o)
		}
	}
	if len(left) > 0 {
		t.Errorf("after DownAll the scheduler left %v", left)
	}
}

// TestUpRefusesAnIncompatibleBotTable: a bot table that cannot serve (here
// last_activity_at stored as text, and a state the state machine does not
// know) is refused before anything changes, naming table, column, what it
// is and what is needed.
func TestUpRefusesAnIncompatibleBotTable(t *testing.T) {
	t.Parallel()
	url := botdb.NewDatabaseWithRows(t, time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	conn := connect(t, url)
	fixture.BotLastActivityAsText(t, conn)
	fixture.MigrationsQueueKeyNotUnique(t, conn)
	fixture.MigrationsSetState(t, conn, botdb.Dormant, "paused")
	before := catalog(t, conn)

	err := up(t, url)
	if !errors.Is(err, migrations.ErrIncompatibleSchema) {
		t.Fatalf("Up = %v, want ErrIncompatibleSchema", err)
	}
	for _, want := range []string{
		"user_engagement_states.last_activity_at: of type text; the scheduler needs type timestamp with time zone",
		`user_engagement_states.state: holding "paused"`,
		"engagement_message_queue.idempotency_key: not unique",
		"nothing was changed",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Up's error %q does not say %q", err, want)
		}
	}
	if after := catalog(t, conn); !slices.Equal(before, after) {
		t.Errorf("a refused Up changed the schema:\nbefore %v\nafter  %v", before, after)
	}
	if fixture.TableExists(t, conn, migrations.Table) {
		t.Errorf("after a refused Up, %s exists, want it missing", migrations.Table)
	}
}

// TestUpgradeFromVersion20: a database the scheduler created before it
// could adopt the bot's tables (schema version 20, no
// engagement_adopted_tables) upgrades to the latest version: none of its
// tables counts as adopted, and row level security closes them all.
func TestUpgradeFromVersion20(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := botdb.NewSupabaseDatabase(t)
	m, err := migrations.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.UpTo(20); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, url)
	fixture.MigrationsDropAdoptedTables(t, conn) // as release 20 left it
	if err := m.Up(); err != nil {
		t.Fatalf("Up from version 20: %v", err)
	}
	if adopted := fixture.MigrationsAdoptedTables(t, conn); len(adopted) != 0 {
		t.Errorf("adopted tables after the upgrade: %v, want none", adopted)
	}
	if open := fixture.MigrationsOpenTables(t, conn); open != 0 {
		t.Errorf("tables without row level security after the upgrade: %d, want 0", open)
	}
	if err := m.DownAll(); err != nil {
		t.Errorf("DownAll after the upgrade: %v", err)
	}
}

// TestPreflightKnowsEveryColumnTheMigrationsAdd (issue 42, item 6): the
// adoption preflight did not know deferred_reason, in_doubt or
// state_entered_at, added after it was written, so a bot table that
// already had one failed half-way through `migrate up` instead of in
// `migrate check`. Every column the migrations add to the bot's tables is
// one the preflight lists.
func TestPreflightKnowsEveryColumnTheMigrationsAdd(t *testing.T) {
	t.Parallel()
	url := botdb.NewDatabase(t)
	conn := connect(t, url)
	columns := func() map[string]bool {
		names := fixture.MigrationsTableColumns(t, conn, botdb.Tables...)
		set := map[string]bool{}
		for _, n := range names {
			set[n] = true
		}
		return set
	}
	before := columns()
	if err := up(t, url); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for table, cols := range migrations.AddedColumns() {
		for _, c := range cols {
			known[table+"."+c] = true
		}
	}
	var added int
	for col := range columns() {
		if before[col] {
			continue
		}
		added++
		if !known[col] {
			t.Errorf("migrate up adds %s, which the adoption preflight (botTables in adopt.go) does not list", col)
		}
	}
	if added == 0 {
		t.Fatal("migrate up added no column to the bot's tables: the test no longer sees them")
	}
}

// TestCheckRefusesABotTableWithAColumnOfTheSchedulers: a bot queue that
// already has in_doubt (and a state table with state_entered_at) is
// refused by `migrate check` (Inspect) and by Up before it changes
// anything, naming the column.
func TestCheckRefusesABotTableWithAColumnOfTheSchedulers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := botdb.NewDatabase(t)
	conn := connect(t, url)
	for _, stmt := range []string{
		`ALTER TABLE engagement_message_queue ADD COLUMN in_doubt boolean`,
		`ALTER TABLE user_engagement_states ADD COLUMN state_entered_at timestamptz`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	m, err := migrations.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in, err := m.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range in.Differences {
		got = append(got, d.String())
	}
	for _, want := range []string{"engagement_message_queue.in_doubt", "user_engagement_states.state_entered_at"} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, want+": exists") }) {
			t.Errorf("migrate check's differences %q do not name %s", got, want)
		}
	}
	before := catalog(t, conn)
	if err := m.Up(); !errors.Is(err, migrations.ErrIncompatibleSchema) {
		t.Fatalf("Up = %v, want ErrIncompatibleSchema", err)
	}
	if after := catalog(t, conn); !slices.Equal(before, after) {
		t.Errorf("a refused Up changed the schema")
	}
}
