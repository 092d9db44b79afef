package migrations

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/golang-migrate/migrate/v4/source"
	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/statemachine"
)

// The bot's tables. On the bot's own database its migrations created them
// first, with its rows in them; migration 1 adopts them as they are
// (docs/migrations.md, "Adopting the bot's database"). What the scheduler
// needs of each is botTables below; Inspect checks an existing database
// against it before any change.

// ErrIncompatibleSchema reports tables of the bot's that cannot serve the
// scheduler as they are. Up refuses them before changing anything.
var ErrIncompatibleSchema = errors.New("the database's existing tables cannot serve the scheduler")

// Difference is one way an existing table cannot serve the scheduler.
type Difference struct {
	Table  string `json:"table"`
	Column string `json:"column,omitempty"` // "" for the table itself
	Is     string `json:"is"`               // what it is
	Need   string `json:"need"`             // what the scheduler needs
}

func (d Difference) String() string {
	where := d.Table
	if d.Column != "" {
		where += "." + d.Column
	}
	return fmt.Sprintf("%s: %s; the scheduler needs %s", where, d.Is, d.Need)
}

// AdoptedTable is a table of the bot's that Up keeps as it is, adding only
// the columns named.
type AdoptedTable struct {
	Name string `json:"name"`
	Rows int64  `json:"rows"`
	// Adds are the nullable columns the migrations add to it.
	Adds []string `json:"adds"`
}

// Inspection is what Up would find, and do, on a database.
type Inspection struct {
	// Version is the schema version applied (0: none).
	Version uint `json:"version"`
	// Adopted are the bot's tables Up would keep, when it has not yet
	// applied migration 1.
	Adopted []AdoptedTable `json:"adopted"`
	// Differences are what keeps Up from running at all.
	Differences []Difference `json:"differences"`
	// Pending are the migrations Up would apply, in order.
	Pending []Pending `json:"pending"`
}

// Pending is one migration Up would apply.
type Pending struct {
	Version uint   `json:"version"`
	Name    string `json:"name"`
	// Summary is the migration's first comment line.
	Summary string `json:"summary"`
	// Statements are its statements' first lines.
	Statements []string `json:"statements"`
}

// columnRole says who owns a column of a bot table.
type columnRole int

const (
	// botColumn: the bot must have it; the scheduler reads (or writes) it.
	botColumn columnRole = iota
	// addedColumn: added by the scheduler's migrations when missing; a
	// column of that name the bot has already must be of the type.
	addedColumn
	// schedulerColumn: the scheduler's alone; the bot must not have a
	// column of that name, which the migrations add and roll back.
	schedulerColumn
)

type columnNeed struct {
	name  string
	types []string // format_type() names accepted; the first is the one needed
	role  columnRole
}

// valueCheck is a column whose existing values must all be in allowed,
// as its statement (queries/adopt_<column>s.sql) reads them: the values
// that are not, at most 10.
type valueCheck struct {
	column  string
	allowed []string
	unknown func(ctx context.Context, conn *pgx.Conn, allowed []string) ([]string, error)
}

// unknownValues runs one of the adopt_<column>s statements, whose rows are
// the values not in allowed.
func unknownValues[P sqlfile.Params, R any, PR sqlfile.Row[R]](st sqlfile.Statement[P, R, PR], args func([]string) P, value func(R) string) func(context.Context, *pgx.Conn, []string) ([]string, error) {
	return func(ctx context.Context, conn *pgx.Conn, allowed []string) ([]string, error) {
		rows, err := st.All(ctx, conn, args(allowed))
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = value(r)
		}
		return out, err
	}
}

var (
	unknownStates = unknownValues(adoptStatesQuery,
		func(a []string) adoptStatesArgs { return adoptStatesArgs{Allowed: a} }, func(r adoptStatesRow) string { return r.Value })
	unknownStatuses = unknownValues(adoptStatusesQuery,
		func(a []string) adoptStatusesArgs { return adoptStatusesArgs{Allowed: a} }, func(r adoptStatusesRow) string { return r.Value })
	unknownDestinations = unknownValues(adoptDestinationsQuery,
		func(a []string) adoptDestinationsArgs { return adoptDestinationsArgs{Allowed: a} }, func(r adoptDestinationsRow) string { return r.Value })
)

type tableNeed struct {
	name    string
	columns []columnNeed
	// unique are columns that need a unique index of their own (see
	// queries/adopt_unique.sql).
	unique []string
	values []valueCheck
	// inserts are the columns the scheduler sets when it inserts rows
	// (nil: it never inserts): any other NOT NULL column needs a default.
	inserts []string
}

var (
	text        = []string{"text", "character varying"}
	uuidType    = []string{"uuid"}
	timestamptz = []string{"timestamp with time zone"}
	boolean     = []string{"boolean"}
	jsonb       = []string{"jsonb"}
	reals       = []string{"real[]"}
	instants    = []string{"timestamp with time zone[]"}
	integer     = []string{"integer", "bigint", "smallint"}
)

func stateNames() []string {
	var out []string
	for _, s := range statemachine.States() {
		out = append(out, string(s))
	}
	return out
}

// botTables is what the scheduler needs of the bot's tables: the design's
// columns (../shared/CONTRACT.md), the columns its migrations add, and the
// values its state machine and queue know.
var botTables = []tableNeed{
	{
		name: "user_profiles",
		columns: []columnNeed{
			{"user_id", uuidType, botColumn},
			{"reengagement_opt_out", boolean, botColumn},
			{"preferred_destination", text, botColumn},
			{"whatsapp_jid", text, botColumn},
			{"locale", text, botColumn},
			{"group_jid", text, addedColumn},
			{"timezone", text, addedColumn},
		},
		unique: []string{"user_id"},
	},
	{
		name: "user_engagement_states",
		columns: []columnNeed{
			{"user_id", uuidType, botColumn},
			{"state", text, botColumn},
			{"last_activity_at", timestamptz, botColumn},
			{"goodbye_sent_at", timestamptz, botColumn},
			{"goodbye_expires_at", timestamptz, botColumn},
			{"remind_at", timestamptz, botColumn},
			{"updated_at", timestamptz, addedColumn},
			{"created_at", timestamptz, addedColumn},
			{"state_changed_at", timestamptz, schedulerColumn},
			{"state_changed_xact_at", timestamptz, schedulerColumn},
			{"state_entered_at", timestamptz, schedulerColumn},
			{"goodbye_failures", integer, schedulerColumn},
			{"goodbye_retry_at", timestamptz, schedulerColumn},
			{"goodbye_holdout", boolean, schedulerColumn},
			{"message_hours", reals, schedulerColumn},
			{"message_hours_at", timestamptz, schedulerColumn},
			{"message_hour", integer, schedulerColumn},
			{"recent_messages", instants, schedulerColumn},
		},
		unique: []string{"user_id"},
		values: []valueCheck{{"state", stateNames(), unknownStates}},
	},
	{
		name: "transactions",
		columns: []columnNeed{
			{"user_id", uuidType, botColumn},
			{"created_at", timestamptz, botColumn},
		},
	},
	{
		name: "engagement_message_queue",
		columns: []columnNeed{
			{"id", uuidType, botColumn},
			{"user_id", uuidType, botColumn},
			{"message_type", text, botColumn},
			{"message_key", text, botColumn},
			{"message_params", jsonb, botColumn},
			{"destination", text, botColumn},
			{"destination_jid", text, botColumn},
			{"scheduled_for", timestamptz, botColumn},
			{"sent_at", timestamptz, botColumn},
			{"status", text, botColumn},
			{"retry_count", integer, botColumn},
			{"error_message", text, botColumn},
			{"idempotency_key", text, botColumn},
			{"created_at", timestamptz, botColumn},
			{"claimed_until", timestamptz, schedulerColumn},
			{"claimed_by", text, schedulerColumn},
			{"provider_message_id", text, schedulerColumn},
			{"job_run_id", []string{"bigint"}, schedulerColumn},
			{"cancel_reason", text, schedulerColumn},
			{"period_start", timestamptz, schedulerColumn},
			{"replay_until", timestamptz, schedulerColumn},
			{"deferred_reason", text, schedulerColumn},
			{"in_doubt", boolean, schedulerColumn},
			{"delivered_at", timestamptz, schedulerColumn},
			{"read_at", timestamptz, schedulerColumn},
			{"billable", boolean, schedulerColumn},
			{"pricing_category", text, schedulerColumn},
			{"variant", text, schedulerColumn},
		},
		unique: []string{"id", "idempotency_key"},
		values: []valueCheck{
			{"status", statemachine.MessageStatuses(), unknownStatuses},
			{"destination", []string{"individual", "group"}, unknownDestinations},
		},
		inserts: []string{"user_id", "message_type", "message_key", "message_params", "destination",
			"destination_jid", "scheduled_for", "idempotency_key", "period_start", "replay_until", "job_run_id"},
	},
}

type existingColumn struct {
	typ        string
	notNull    bool
	hasDefault bool
}

type existingTable struct {
	isTable bool
	columns map[string]existingColumn
	order   []string
}

// Inspect reports what Up would do on the database, and what keeps it from
// running: the bot's tables it would adopt and how they differ from what
// the scheduler needs, and the migrations it would apply. It changes
// nothing and does not wait for a migrator that is running.
func (mg *Migrator) Inspect() (Inspection, error) {
	version, dirty, err := mg.Version()
	if err != nil {
		return Inspection{}, err
	}
	if dirty {
		return Inspection{}, dirtyError(version)
	}
	in := Inspection{Version: version, Adopted: []AdoptedTable{}, Differences: []Difference{}, Pending: []Pending{}}
	if version == 0 {
		adopted, diffs, err := mg.inspectBotTables(mg.ctx)
		if err != nil {
			return Inspection{}, err
		}
		in.Adopted = append(in.Adopted, adopted...)
		in.Differences = append(in.Differences, diffs...)
	}
	for _, v := range versions {
		if v <= version {
			continue
		}
		p, err := pendingMigration(v)
		if err != nil {
			return Inspection{}, err
		}
		in.Pending = append(in.Pending, p)
	}
	return in, nil
}

// refuseIncompatible is Up's first step on a database without the
// scheduler's schema: the bot's tables must serve as they are, or nothing
// is changed.
func (mg *Migrator) refuseIncompatible() error {
	version, _, err := mg.Version()
	if err != nil || version != 0 {
		return err
	}
	_, diffs, err := mg.inspectBotTables(mg.ctx)
	if err != nil {
		return err
	}
	if len(diffs) == 0 {
		return nil
	}
	lines := make([]string, len(diffs))
	for i, d := range diffs {
		lines[i] = d.String()
	}
	return fmt.Errorf("%w, so nothing was changed (see `engagementctl migrate check` and docs/migrations.md): %s",
		ErrIncompatibleSchema, strings.Join(lines, "; "))
}

func (mg *Migrator) inspectBotTables(ctx context.Context) (adopted []AdoptedTable, diffs []Difference, err error) {
	err = mg.withConn(ctx, func(conn *pgx.Conn) error {
		adopted, diffs, err = inspectBotTables(ctx, conn)
		return err
	})
	return adopted, diffs, err
}

func inspectBotTables(ctx context.Context, conn *pgx.Conn) ([]AdoptedTable, []Difference, error) {
	names := make([]string, len(botTables))
	for i, t := range botTables {
		names[i] = t.name
	}
	columns, err := adoptColumnsQuery.All(ctx, conn, adoptColumnsArgs{Tables: names})
	if err != nil {
		return nil, nil, fmt.Errorf("read the existing tables: %w", err)
	}
	existing := map[string]*existingTable{}
	for _, c := range columns {
		t := existing[c.TableName]
		if t == nil {
			t = &existingTable{isTable: c.IsTable, columns: map[string]existingColumn{}}
			existing[c.TableName] = t
		}
		t.columns[c.ColumnName] = existingColumn{typ: c.Type, notNull: c.NotNull, hasDefault: c.HasDefault}
		t.order = append(t.order, c.ColumnName)
	}

	var (
		adopted []AdoptedTable
		diffs   []Difference
	)
	for _, need := range botTables {
		have := existing[need.name]
		if have == nil {
			continue // migration 1 creates it
		}
		if !have.isTable {
			diffs = append(diffs, Difference{Table: need.name, Is: "not a table (a view?)", Need: "a table"})
			continue
		}
		d, adds := compareColumns(need, have)
		diffs = append(diffs, d...)
		d, err := compareContents(ctx, conn, need, have)
		if err != nil {
			return nil, nil, err
		}
		diffs = append(diffs, d...)
		n, err := countRows(ctx, conn, need.name)
		if err != nil {
			return nil, nil, fmt.Errorf("count the rows of %s: %w", need.name, err)
		}
		adopted = append(adopted, AdoptedTable{Name: need.name, Rows: n, Adds: adds})
	}
	return adopted, diffs, nil
}

// countRows counts the rows of table, one of botTables: its name is the
// statement's, built here, so the count is read by name.
func countRows(ctx context.Context, conn *pgx.Conn, table string) (int64, error) {
	rows, err := conn.Query(ctx, `SELECT count(*) AS row_count FROM `+pgx.Identifier{table}.Sanitize())
	if err != nil {
		return 0, err
	}
	n, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[struct {
		RowCount int64 `db:"row_count"`
	}])
	return n.RowCount, err
}

// compareColumns compares a bot table's columns with what the scheduler
// needs of them, and lists the columns the migrations would add.
func compareColumns(need tableNeed, have *existingTable) (diffs []Difference, adds []string) {
	for _, c := range need.columns {
		col, ok := have.columns[c.name]
		switch {
		case !ok && c.role == botColumn:
			diffs = append(diffs, Difference{need.name, c.name, "missing", "a column of type " + c.types[0]})
		case !ok:
			adds = append(adds, c.name+" "+c.types[0])
		case c.role == schedulerColumn:
			diffs = append(diffs, Difference{need.name, c.name, "exists (" + col.typ + ")",
				"the name for a column of its own, which its migrations add and roll back"})
		case !slices.Contains(c.types, col.typ):
			diffs = append(diffs, Difference{need.name, c.name, "of type " + col.typ, "type " + c.types[0]})
		}
	}
	if need.inserts != nil {
		for _, name := range have.order {
			col := have.columns[name]
			if col.notNull && !col.hasDefault && !slices.Contains(need.inserts, name) {
				diffs = append(diffs, Difference{need.name, name, "NOT NULL without a default",
					"a default (the scheduler's inserts set only " + strings.Join(need.inserts, ", ") + ")"})
			}
		}
	}
	return diffs, adds
}

// compareContents checks a bot table's unique indexes and the values its
// rows hold, in the columns it has.
func compareContents(ctx context.Context, conn *pgx.Conn, need tableNeed, have *existingTable) ([]Difference, error) {
	var diffs []Difference
	for _, column := range need.unique {
		if _, ok := have.columns[column]; !ok {
			continue
		}
		row, err := adoptUniqueQuery.One(ctx, conn, adoptUniqueArgs{Table: need.name, Column: column})
		if err != nil {
			return nil, fmt.Errorf("read the indexes of %s: %w", need.name, err)
		}
		if !row.HasUnique {
			diffs = append(diffs, Difference{need.name, column, "not unique (no unique index on it alone)",
				fmt.Sprintf("a unique index: CREATE UNIQUE INDEX CONCURRENTLY ON %s (%s) WHERE %s IS NOT NULL", need.name, column, column)})
		}
	}
	for _, v := range need.values {
		if _, ok := have.columns[v.column]; !ok {
			continue
		}
		values, err := v.unknown(ctx, conn, v.allowed)
		if err != nil {
			return nil, fmt.Errorf("read the values of %s.%s: %w", need.name, v.column, err)
		}
		var unknown []string
		for _, s := range values {
			unknown = append(unknown, fmt.Sprintf("%q", s))
		}
		if len(unknown) > 0 {
			diffs = append(diffs, Difference{need.name, v.column, "holding " + strings.Join(unknown, ", "),
				"only " + strings.Join(v.allowed, ", ")})
		}
	}
	return diffs, nil
}

// pendingMigration describes the embedded up migration of version v.
func pendingMigration(v uint) (Pending, error) {
	name, body, err := upMigration(v)
	if err != nil {
		return Pending{}, err
	}
	p := Pending{Version: v, Name: name, Summary: summary(body)}
	for _, stmt := range splitStatements(body) {
		first, _, _ := strings.Cut(stmt, "\n")
		p.Statements = append(p.Statements, strings.TrimSpace(first))
	}
	return p, nil
}

// summary is the first sentence of a migration's opening comment.
func summary(body string) string {
	var words []string
	for _, line := range strings.Split(body, "\n") {
		text, ok := strings.CutPrefix(strings.TrimSpace(line), "--")
		if !ok || strings.TrimSpace(text) == "" {
			if len(words) > 0 {
				break
			}
			continue
		}
		words = append(words, strings.Fields(text)...)
	}
	s := strings.Join(words, " ")
	for i := range len(s) - 1 {
		if (s[i] == '.' || s[i] == '?') && s[i+1] == ' ' {
			s = s[:i+1]
			break
		}
	}
	if r := []rune(s); len(r) > 160 {
		s = string(r[:159]) + "…"
	}
	return s
}

// upMigration is the name and body of the embedded up migration of version v.
func upMigration(v uint) (name, body string, err error) {
	entries, _ := fs.ReadDir(files, ".") // fixed at build time; cannot fail
	for _, e := range entries {
		m, err := source.DefaultParse(e.Name())
		if err != nil || m.Version != v || m.Direction != source.Up {
			continue
		}
		b, err := fs.ReadFile(files, e.Name())
		return m.Identifier, string(b), err
	}
	return "", "", fmt.Errorf("%w: %d", ErrUnknownVersion, v)
}

// splitStatements splits a migration into its statements, without their
// comments: at each semicolon outside quotes, quoted identifiers, dollar
// quotes and comments.
func splitStatements(body string) []string {
	var (
		out   []string
		cur   strings.Builder
		flush = func() {
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, s)
			}
			cur.Reset()
		}
	)
	for i := 0; i < len(body); {
		rest := body[i:]
		switch {
		case strings.HasPrefix(rest, "--"):
			end := strings.IndexByte(rest, '\n')
			if end < 0 {
				end = len(rest)
			}
			i += end
		case strings.HasPrefix(rest, "/*"):
			end := strings.Index(rest[2:], "*/")
			if end < 0 {
				end = len(rest) - 4
			}
			i += end + 4
		case rest[0] == '\'' || rest[0] == '"':
			end := strings.IndexByte(rest[1:], rest[0])
			if end < 0 {
				end = len(rest) - 2
			}
			cur.WriteString(rest[:end+2])
			i += end + 2
		case rest[0] == '$':
			tag := dollarTag.FindString(rest)
			if tag == "" {
				cur.WriteByte('$')
				i++
				break
			}
			end := strings.Index(rest[len(tag):], tag)
			if end < 0 {
				end = len(rest) - 2*len(tag)
			}
			cur.WriteString(rest[:end+2*len(tag)])
			i += end + 2*len(tag)
		case rest[0] == ';':
			flush()
			i++
		default:
			cur.WriteByte(rest[0])
			i++
		}
	}
	flush()
	return out
}

var dollarTag = regexp.MustCompile(`^\$[A-Za-z_]*\$`)
