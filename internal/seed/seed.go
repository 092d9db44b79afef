// Package seed fills a database with realistic sample users for the demo and
// the benchmarks: deterministically (the same seed and options give the same
// rows, ids included) and set-based (one SQL statement builds every row from
// generate_series; no per-row round trips).
//
// User i in [0, Users) gets its user_id from md5(seed || ':' || i) and its
// category, flags and timestamps from sha256(seed || ':' || i || ':draws'),
// whose bytes give independent draws: 16 bits for each of the category,
// opt-out, destination, locale and transactions buckets (0..999), 24 bits for
// each timestamp offset. The mix, relative to Options.AsOf:
//
//	30.0%  active, inactive 14+ days   last_activity_at 15..60 days before AsOf
//	10.0%  goodbye_sent, expired       goodbye_sent_at 3..10 days before AsOf,
//	                                   goodbye_expires_at = sent + 48 h,
//	                                   last_activity_at = sent - 14..30 days
//	 2.0%  goodbye_sent, still open    sent 1..47 hours before AsOf (expires = sent + 48 h)
//	 5.0%  remind_later, due           remind_at 1 hour..5 days before AsOf
//	 2.0%  remind_later, not yet due   remind_at 1..10 days after AsOf
//	 3.0%  help_flow                   last_activity_at 0..6 days before AsOf
//	 5.0%  dormant                     last_activity_at 30..180 days before AsOf
//	43.0%  active, recently active     last_activity_at 0..13 days before AsOf
//
// Independently of the category: 5% have reengagement_opt_out; 10% prefer
// 'group' and have a group_jid, 1% prefer 'group' with a NULL group_jid (they
// fall back to individual); 0.5% have no whatsapp_jid and prefer individual
// (users with no destination); locale is 80% pt-BR, 20% en. whatsapp_jid is
// '5511' || lpad(i, 9, '0') || '@s.whatsapp.net' and group_jid
// '1203630' || lpad(i, 11, '0') || '@g.us'. 40% of users have 3 transactions
// in (AsOf - 7 days, AsOf], another 10% one transaction 8..30 days before
// AsOf. A remind_later user's last_activity_at is remind_at - 14 days (when
// they answered the goodbye). Every timestamp, created_at and updated_at
// included, is derived from AsOf, never from the clock; a state row's
// state_changed_at and state_changed_xact_at are its updated_at (the
// generated history says the state last changed then).
//
// Measured with BenchmarkGenerate on a 2-core machine (PostgreSQL 15 with
// default settings, shared with other work; fresh database; pool), including
// ANALYZE and the Stats query: 100,000 users in about 3 s, 1,000,000 users in
// 30-35 s. Most of it is index maintenance (five b-trees of about a million
// entries) and the foreign-key check of each state row.
package seed

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// Options say what to generate.
type Options struct {
	Users int       // how many users
	Seed  int64     // same seed + same options => identical rows (ids included)
	AsOf  time.Time // the instant the mix is relative to (e.g. the job's --as-of); required
}

// MaxUsers is the most users one Generate call makes: user i's whatsapp_jid
// holds i in 9 digits.
const MaxUsers = 1_000_000_000

// DB is what Generate needs: a pool, connection or transaction.
type DB = postgres.Querier

// Stats counts what was generated, read back from the database after
// generation in one aggregate query over the three tables: on a database
// that held no users before (the usual case), exactly the generated rows.
type Stats struct {
	Users        int
	ByState      map[string]int // state -> users
	ByCategory   map[string]int // category (see Categories) -> users, classified from the rows relative to AsOf
	OptedOut     int
	Transactions int
}

// The categories of the mix, as Stats.ByCategory names them.
const (
	CategoryInactive       = "active_inactive_14d" // active, last activity 14+ days before AsOf
	CategoryGoodbyeExpired = "goodbye_expired"     // goodbye_sent, goodbye_expires_at <= AsOf
	CategoryGoodbyeOpen    = "goodbye_open"        // goodbye_sent, goodbye_expires_at > AsOf
	CategoryRemindDue      = "remind_later_due"    // remind_later, remind_at <= AsOf
	CategoryRemindPending  = "remind_later_not_due"
	CategoryHelpFlow       = "help_flow"
	CategoryDormant        = "dormant"
	CategoryRecent         = "active_recent" // active, last activity within 14 days of AsOf
)

const day = 24 * time.Hour

// category is one slice of the mix: its share, its state, how its timestamps
// are drawn (SQL over asof and the 24-bit draws r1, r2), and how it is
// recognized in the database afterwards.
type category struct {
	name     string
	permille int
	state    string
	// lastActivity, goodbyeSent, remindAt, updatedAt are SQL expressions;
	// goodbyeSent and remindAt may be "" (NULL). goodbye_expires_at is
	// goodbye_sent_at + 48 h.
	lastActivity, goodbyeSent, remindAt, updatedAt string
	// classify is a predicate on s (user_engagement_states) and asof.
	classify string
}

const (
	asof        = `$3::timestamptz`
	goodbyeSent = `goodbye_sent_at`
	remindAt    = `remind_at`
	lastAct     = `last_activity_at`
)

// categories is the mix, in the order the category hash is cut; the shares
// add up to 1000‰.
var categories = []category{
	{name: CategoryInactive, permille: 300, state: "active",
		lastActivity: before(asof, `r1`, 15*day, 60*day), updatedAt: lastAct,
		classify: `s.state = 'active' AND s.last_activity_at < ` + asof + ` - interval '14 days'`},
	{name: CategoryGoodbyeExpired, permille: 100, state: "goodbye_sent",
		goodbyeSent: before(asof, `r1`, 3*day, 10*day), lastActivity: before(goodbyeSent, `r2`, 14*day, 30*day), updatedAt: goodbyeSent,
		classify: `s.state = 'goodbye_sent' AND s.goodbye_expires_at <= ` + asof},
	{name: CategoryGoodbyeOpen, permille: 20, state: "goodbye_sent",
		goodbyeSent: before(asof, `r1`, time.Hour, 47*time.Hour), lastActivity: before(goodbyeSent, `r2`, 14*day, 30*day), updatedAt: goodbyeSent,
		classify: `s.state = 'goodbye_sent' AND s.goodbye_expires_at > ` + asof},
	{name: CategoryRemindDue, permille: 50, state: "remind_later",
		remindAt: before(asof, `r1`, time.Hour, 5*day), lastActivity: remindAt + ` - interval '14 days'`, updatedAt: lastAct,
		classify: `s.state = 'remind_later' AND s.remind_at <= ` + asof},
	{name: CategoryRemindPending, permille: 20, state: "remind_later",
		remindAt: after(asof, `r1`, day, 10*day), lastActivity: remindAt + ` - interval '14 days'`, updatedAt: lastAct,
		classify: `s.state = 'remind_later' AND s.remind_at > ` + asof},
	{name: CategoryHelpFlow, permille: 30, state: "help_flow",
		lastActivity: before(asof, `r1`, 0, 6*day), updatedAt: lastAct,
		classify: `s.state = 'help_flow'`},
	{name: CategoryDormant, permille: 50, state: "dormant",
		// Dormant after an unanswered goodbye: 14 days of silence, then 48 h.
		lastActivity: before(asof, `r1`, 30*day, 180*day), updatedAt: lastAct + ` + interval '16 days'`,
		classify: `s.state = 'dormant'`},
	{name: CategoryRecent, permille: 430, state: "active",
		lastActivity: before(asof, `r1`, 0, 13*day), updatedAt: lastAct,
		classify: `s.state = 'active' AND s.last_activity_at >= ` + asof + ` - interval '14 days'`},
}

// states are the engagement states, as the schema's CHECK lists them.
var states = []string{"active", "goodbye_sent", "help_flow", "remind_later", "dormant"}

// seconds is a SQL interval literal of d, whole seconds.
func seconds(d time.Duration) string {
	return fmt.Sprintf("interval '%d seconds'", int64(d/time.Second))
}

// spread is the SQL interval lo + the 24-bit draw r scaled to the seconds
// in [lo, hi]: uniform over [lo, hi] (to the second where the range is under
// 2^24 seconds, 194 days).
func spread(r string, lo, hi time.Duration) string {
	n := int64((hi-lo)/time.Second) + 1
	return fmt.Sprintf("(%s + ((%s::bigint * %d) >> 24) * interval '1 second')", seconds(lo), r, n)
}

func before(t, r string, lo, hi time.Duration) string { return t + " - " + spread(r, lo, hi) }
func after(t, r string, lo, hi time.Duration) string  { return t + " + " + spread(r, lo, hi) }

// bits is the big-endian unsigned integer in bytes [at, at+n) of the
// bytea h (n <= 3).
func bits(h string, at, n int) string {
	parts := make([]string, n)
	for k := range n {
		parts[k] = fmt.Sprintf("(get_byte(%s, %d) << %d)", h, at+k, 8*(n-1-k))
	}
	return "(" + strings.Join(parts, " | ") + ")"
}

// draw is the 24-bit draw at byte at of the bytea h.
func draw(h string, at int) string { return bits(h, at, 3) }

// bucket is the draw 0..999 from the 16 bits at byte at of h, scaled (not
// reduced modulo 1000) so every bucket is equally likely to within 1/65536.
func bucket(h string, at int) string {
	return fmt.Sprintf("((%s * 1000) >> 16)", bits(h, at, 2))
}

// userHash is user i's id, as md5 hex.
const userHash = `md5($1::bigint::text || ':' || g.i)`

// generateSQL inserts every row in one statement
// (queries/generate.sql.tmpl), its CASE expressions one WHEN per category
// of the mix.
var generateSQL = buildGenerateSQL()

func buildGenerateSQL() string {
	var caseState, caseLast, caseSent, caseRemind, caseUpdated strings.Builder
	cum := 0
	for _, c := range categories {
		cum += c.permille
		when := fmt.Sprintf("\n\t\t\t WHEN cat < %d THEN ", cum)
		nullable := func(e string) string {
			if e == "" {
				return "NULL"
			}
			return e
		}
		caseState.WriteString(when + "'" + c.state + "'")
		caseLast.WriteString(when + c.lastActivity)
		caseSent.WriteString(when + nullable(c.goodbyeSent))
		caseRemind.WriteString(when + nullable(c.remindAt))
		caseUpdated.WriteString(when + c.updatedAt)
	}
	if cum != 1000 {
		panic(fmt.Sprintf("seed: the mix adds up to %d‰, not 1000‰", cum))
	}
	return render("generate.sql.tmpl", map[string]string{
		"Cat": bucket("h", 0), "Opt": bucket("h", 2), "Dest": bucket("h", 4), "Loc": bucket("h", 6), "Txb": bucket("h", 8),
		"R1": draw("h", 10), "R2": draw("h", 13), "R3": draw("h", 16), "X1": draw("h", 19), "X2": draw("h", 22), "X3": draw("h", 25),
		"UserHash":  userHash,
		"CaseState": caseState.String(), "CaseSent": caseSent.String(), "CaseRemind": caseRemind.String(),
		"CaseLast": caseLast.String(), "CaseUpdated": caseUpdated.String(),
		"CreatedAt": before(asof, "r3", 181*day, 730*day),
		"TxRecent":  before(asof, "CASE x.k WHEN 1 THEN u.x1 WHEN 2 THEN u.x2 ELSE u.x3 END", 0, 7*day-time.Second),
		"TxOld":     before(asof, "u.x1", 8*day, 30*day),
	})
}

// statsSQL counts the users in the database by state, category (relative
// to AsOf, $1) and opt-out, and the transactions.
var statsSQL = buildStatsSQL()

func buildStatsSQL() string {
	var cols strings.Builder
	for _, st := range states {
		fmt.Fprintf(&cols, ",\n\t       count(s.user_id) FILTER (WHERE s.state = '%s') AS state_%s", st, st)
	}
	for _, c := range categories {
		fmt.Fprintf(&cols, ",\n\t       count(s.user_id) FILTER (WHERE %s) AS category_%s", strings.ReplaceAll(c.classify, asof, `$1::timestamptz`), c.name)
	}
	return render("stats.sql.tmpl", map[string]string{"Columns": cols.String()})
}

// The package's built statements are text/templates in queries/: their
// shape is a file a reader can follow, the parts the mix table decides are
// filled in. Its fixed ones are queries/*.sql, typed in queries.gen.go
// (make sql).
//
//go:embed queries/*.sql.tmpl
var queryFiles embed.FS

// render is the statement of template name with fields filled in.
func render(name string, fields map[string]string) string {
	t := template.Must(template.ParseFS(queryFiles, "queries/"+name))
	var b strings.Builder
	if err := t.Execute(&b, fields); err != nil {
		panic("seed: render " + name + ": " + err.Error())
	}
	return b.String()
}

// Generate inserts opts.Users users (profiles, engagement states and
// transactions) as the package comment describes, runs ANALYZE on the three
// tables and returns their Stats.
//
// The rows go in with one statement, so they appear together or not at all
// whatever db is. When db can Begin (a pool, a connection or a transaction,
// where it makes a savepoint), everything runs in one transaction that turns
// off JIT and raises work_mem for itself, which makes generation about a
// third faster, and lifts the server's statement_timeout (a role's or
// database's default: 10M users take minutes); the settings are put back
// before it commits. A client-side limit is the caller's to lift (the
// engagementctl seed command does, with postgres.WithStatementTimeout).
//
// The generated user ids must not exist yet: generating the same seed twice
// into one database fails on the primary key, while different seeds give
// disjoint ids and can be stacked.
func Generate(ctx context.Context, db DB, opts Options) (Stats, error) {
	if opts.Users < 0 || opts.Users > MaxUsers {
		return Stats{}, fmt.Errorf("seed: Users is %d, want 0..%d", opts.Users, MaxUsers)
	}
	if opts.AsOf.IsZero() {
		return Stats{}, errors.New("seed: AsOf is required")
	}
	b, ok := db.(interface {
		Begin(ctx context.Context) (pgx.Tx, error)
	})
	if !ok {
		return generate(ctx, db, opts)
	}
	tx, err := b.Begin(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("seed: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	was, err := settingsLiftQuery.One(ctx, tx, sqlfile.None{})
	if err != nil {
		return Stats{}, fmt.Errorf("seed: settings: %w", err)
	}
	st, err := generate(ctx, tx, opts)
	if err != nil {
		return Stats{}, err
	}
	// Back to the caller's values, for a caller whose transaction goes on.
	if _, err := settingsRestoreQuery.Exec(ctx, tx, settingsRestoreArgs{
		Jit: was.Jit, WorkMem: was.WorkMem, StatementTimeout: was.StatementTimeout}); err != nil {
		return Stats{}, fmt.Errorf("seed: settings: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Stats{}, fmt.Errorf("seed: commit: %w", err)
	}
	return st, nil
}

func generate(ctx context.Context, db DB, opts Options) (Stats, error) {
	if opts.Users > 0 {
		if _, err := db.Exec(ctx, generateSQL, opts.Seed, int64(opts.Users), opts.AsOf); err != nil {
			return Stats{}, fmt.Errorf("seed: generate %d users (seed %d): %w", opts.Users, opts.Seed, err)
		}
		if _, err := db.Exec(ctx, `ANALYZE user_profiles, user_engagement_states, transactions`); err != nil {
			return Stats{}, fmt.Errorf("seed: analyze: %w", err)
		}
	}
	return readStats(ctx, db, opts.AsOf)
}

// readStats runs statsSQL, whose columns the mix decides: they are read
// by name (users, opted_out, transactions, state_<state>,
// category_<category>), not by position.
func readStats(ctx context.Context, db DB, asOf time.Time) (Stats, error) {
	rows, err := db.Query(ctx, statsSQL, asOf)
	if err != nil {
		return Stats{}, fmt.Errorf("seed: count the generated rows: %w", err)
	}
	counts, err := pgx.CollectExactlyOneRow(rows, pgx.RowToMap)
	if err != nil {
		return Stats{}, fmt.Errorf("seed: count the generated rows: %w", err)
	}
	count := func(column string) int {
		n, _ := counts[column].(int64) // count(*) is a bigint, never NULL
		return int(n)
	}
	st := Stats{Users: count("users"), OptedOut: count("opted_out"), Transactions: count("transactions"),
		ByState: make(map[string]int, len(states)), ByCategory: make(map[string]int, len(categories))}
	for _, s := range states {
		st.ByState[s] = count("state_" + s)
	}
	for _, c := range categories {
		st.ByCategory[c.name] = count("category_" + c.name)
	}
	return st, nil
}

// ExistingUsers counts the users db holds: engagementctl seed and smoke
// fill only empty databases. Without the schema it fails with the
// server's undefined_table (42P01).
func ExistingUsers(ctx context.Context, db DB) (int64, error) {
	row, err := usersQuery.One(ctx, db, sqlfile.None{})
	return row.Users, err
}
