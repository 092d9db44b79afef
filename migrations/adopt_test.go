package migrations_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
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
	rows, err := conn.Query(context.Background(), `
		SELECT 'relation ' || c.relname || ' ' || c.relkind::text || ' rls=' || c.relrowsecurity || ' acl=' || coalesce(c.relacl::text, '')
		  FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace
		UNION ALL
		SELECT 'column ' || a.attrelid::regclass || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull
		  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		 WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
		UNION ALL
		SELECT 'index ' || pg_get_indexdef(i.indexrelid) || ' valid=' || i.indisvalid
		  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE c.relnamespace = 'public'::regnamespace
		UNION ALL
		SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
		  FROM pg_constraint WHERE connamespace = 'public'::regnamespace
		UNION ALL
		SELECT 'function ' || p.oid::regprocedure || ' acl=' || coalesce(p.proacl::text, '')
		  FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
		UNION ALL
		SELECT 'policy ' || polrelid::regclass || ' ' || polname FROM pg_policy
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
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

	var adopted []string
	rows, _ := conn.Query(ctx, `SELECT table_name FROM engagement_adopted_tables ORDER BY 1`)
	if adopted, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if want := []string{"engagement_message_queue", "transactions", "user_engagement_states", "user_profiles"}; !slices.Equal(adopted, want) {
		t.Errorf("engagement_adopted_tables = %v, want %v", adopted, want)
	}
	// What the scheduler added: nullable columns, and its indexes, valid.
	var added []string
	rows, _ = conn.Query(ctx, `
		SELECT a.attrelid::regclass || '.' || a.attname || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
		  FROM pg_attribute a JOIN engagement_adopted_tables t ON a.attrelid = t.table_name::regclass
		 WHERE a.attnum > 0 AND NOT a.attisdropped AND NOT a.attname = ANY(t.columns)
		 ORDER BY 1`)
	if added, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
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
		var valid bool
		if err := conn.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`, idx).Scan(&valid); err != nil || !valid {
			t.Errorf("index %s: valid %v (%v), want a valid index", idx, valid, err)
		}
	}
	// The bot's unique key serves ON CONFLICT: no second copy of it.
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_index WHERE indrelid = 'engagement_message_queue'::regclass AND indisunique
	                                 AND indkey[0] = (SELECT attnum FROM pg_attribute WHERE attrelid = 'engagement_message_queue'::regclass AND attname = 'idempotency_key')`).Scan(&n); err != nil || n != 2 {
		t.Errorf("unique indexes on the queue's idempotency_key: %d (%v), want the bot's 2 and no more", n, err)
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
	ctx := context.Background()
	url := botdb.NewDatabaseWithRows(t, time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	conn := connect(t, url)
	for _, stmt := range []string{
		`ALTER TABLE user_engagement_states ALTER COLUMN last_activity_at TYPE text`,
		`ALTER TABLE engagement_message_queue DROP CONSTRAINT engagement_message_queue_idempotency_key_key`,
		`DROP INDEX idx_queue_idempotency_key`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := conn.Exec(ctx, `UPDATE user_engagement_states SET state = 'paused' WHERE user_id = $1`, botdb.Dormant); err != nil {
		t.Fatal(err)
	}
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
	var pgErr *pgconn.PgError
	if err := conn.QueryRow(ctx, `SELECT 1 FROM `+migrations.Table).Scan(new(int)); !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Errorf("after a refused Up, reading %s = %v, want it missing (42P01)", migrations.Table, err)
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
	if _, err := conn.Exec(ctx, `DROP TABLE engagement_adopted_tables`); err != nil { // as release 20 left it
		t.Fatal(err)
	}
	if err := m.Up(); err != nil {
		t.Fatalf("Up from version 20: %v", err)
	}
	var adopted, open int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM engagement_adopted_tables`).Scan(&adopted); err != nil || adopted != 0 {
		t.Errorf("adopted tables after the upgrade: %d (%v), want 0", adopted, err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' AND NOT relrowsecurity`).Scan(&open); err != nil || open != 0 {
		t.Errorf("tables without row level security after the upgrade: %d (%v), want 0", open, err)
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
	ctx := context.Background()
	url := botdb.NewDatabase(t)
	conn := connect(t, url)
	columns := func() map[string]bool {
		rows, err := conn.Query(ctx, `SELECT table_name || '.' || column_name FROM information_schema.columns
			WHERE table_schema = 'public' AND table_name = ANY($1)`, botdb.Tables)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
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
