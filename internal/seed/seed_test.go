package seed_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/seed"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

var asOf = time.Date(2025, 3, 10, 6, 0, 0, 0, time.UTC)

// newDB returns a pool on a fresh migrated database, dropped in t.Cleanup.
func newDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	return pool
}

func generate(t testing.TB, db seed.DB, opts seed.Options) seed.Stats {
	t.Helper()
	st, err := seed.Generate(context.Background(), db, opts)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", opts, err)
	}
	return st
}

func queryInt(t *testing.T, db *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// checkShare fails unless got/total is within tolerance percentage points of want percent.
func checkShare(t *testing.T, what string, got, total int, want, tolerance float64) {
	t.Helper()
	share := 100 * float64(got) / float64(total)
	if math.Abs(share-want) > tolerance {
		t.Errorf("%s: %d of %d = %.2f%%, want %.1f%% ± %.1f", what, got, total, share, want, tolerance)
	}
}

func TestGenerateMix(t *testing.T) {
	db := newDB(t)
	const users = 10_000
	st := generate(t, db, seed.Options{Users: users, Seed: 1, AsOf: asOf})
	t.Logf("stats: %+v", st)

	if st.Users != users {
		t.Errorf("Stats.Users = %d, want %d", st.Users, users)
	}
	for table, want := range map[string]int{"user_profiles": users, "user_engagement_states": users} {
		if n := queryInt(t, db, "SELECT count(*) FROM "+table); n != want {
			t.Errorf("%s has %d rows, want %d", table, n, want)
		}
	}

	// Categories, classified here from the rows with the spec's own ranges
	// (independently of Stats), and compared with Stats.ByCategory.
	cats := []struct {
		name  string
		where string
		share float64
	}{
		{seed.CategoryInactive, `state = 'active' AND last_activity_at BETWEEN $1::timestamptz - interval '60 days' AND $1::timestamptz - interval '15 days'
			AND goodbye_sent_at IS NULL AND remind_at IS NULL`, 30},
		{seed.CategoryGoodbyeExpired, `state = 'goodbye_sent' AND goodbye_sent_at BETWEEN $1::timestamptz - interval '10 days' AND $1::timestamptz - interval '3 days'
			AND goodbye_expires_at = goodbye_sent_at + interval '48 hours'
			AND last_activity_at BETWEEN goodbye_sent_at - interval '30 days' AND goodbye_sent_at - interval '14 days'`, 10},
		{seed.CategoryGoodbyeOpen, `state = 'goodbye_sent' AND goodbye_sent_at BETWEEN $1::timestamptz - interval '47 hours' AND $1::timestamptz - interval '1 hour'
			AND goodbye_expires_at = goodbye_sent_at + interval '48 hours'
			AND last_activity_at BETWEEN goodbye_sent_at - interval '30 days' AND goodbye_sent_at - interval '14 days'`, 2},
		{seed.CategoryRemindDue, `state = 'remind_later' AND remind_at BETWEEN $1::timestamptz - interval '5 days' AND $1::timestamptz - interval '1 hour'`, 5},
		{seed.CategoryRemindPending, `state = 'remind_later' AND remind_at BETWEEN $1::timestamptz + interval '1 day' AND $1::timestamptz + interval '10 days'`, 2},
		{seed.CategoryHelpFlow, `state = 'help_flow' AND last_activity_at BETWEEN $1::timestamptz - interval '6 days' AND $1::timestamptz`, 3},
		{seed.CategoryDormant, `state = 'dormant' AND last_activity_at <= $1::timestamptz`, 5},
		{seed.CategoryRecent, `state = 'active' AND last_activity_at BETWEEN $1::timestamptz - interval '13 days' AND $1::timestamptz
			AND goodbye_sent_at IS NULL AND remind_at IS NULL`, 43},
	}
	sum := 0
	for _, c := range cats {
		n := queryInt(t, db, `SELECT count(*) FROM user_engagement_states WHERE `+c.where, asOf)
		sum += n
		checkShare(t, c.name, n, users, c.share, 1.5)
		if st.ByCategory[c.name] != n {
			t.Errorf("Stats.ByCategory[%s] = %d, the rows say %d", c.name, st.ByCategory[c.name], n)
		}
	}
	if sum != users {
		t.Errorf("the categories cover %d users, want all %d", sum, users)
	}
	if len(st.ByCategory) != len(seed.Categories()) {
		t.Errorf("Stats.ByCategory has %d categories, want %d", len(st.ByCategory), len(seed.Categories()))
	}
	for state, want := range map[string]float64{"active": 73, "goodbye_sent": 12, "remind_later": 7, "help_flow": 3, "dormant": 5} {
		checkShare(t, "state "+state, st.ByState[state], users, want, 1.5)
		if n := queryInt(t, db, `SELECT count(*) FROM user_engagement_states WHERE state = $1`, state); n != st.ByState[state] {
			t.Errorf("Stats.ByState[%s] = %d, the table has %d", state, st.ByState[state], n)
		}
	}

	// Flags.
	checkShare(t, "opted out", st.OptedOut, users, 5, 1)
	if n := queryInt(t, db, `SELECT count(*) FROM user_profiles WHERE reengagement_opt_out`); n != st.OptedOut {
		t.Errorf("Stats.OptedOut = %d, the table has %d", st.OptedOut, n)
	}
	checkShare(t, "group with group_jid", queryInt(t, db,
		`SELECT count(*) FROM user_profiles WHERE preferred_destination = 'group' AND group_jid LIKE '1203630%@g.us'`), users, 10, 1.5)
	checkShare(t, "group without group_jid", queryInt(t, db,
		`SELECT count(*) FROM user_profiles WHERE preferred_destination = 'group' AND group_jid IS NULL`), users, 1, 0.5)
	checkShare(t, "no destination", queryInt(t, db,
		`SELECT count(*) FROM user_profiles WHERE whatsapp_jid IS NULL AND preferred_destination = 'individual'`), users, 0.5, 0.3)
	if n := queryInt(t, db, `SELECT count(*) FROM user_profiles WHERE whatsapp_jid IS NULL AND preferred_destination = 'group'`); n != 0 {
		t.Errorf("%d group users have no whatsapp_jid, want 0", n)
	}
	checkShare(t, "locale en", queryInt(t, db, `SELECT count(*) FROM user_profiles WHERE locale = 'en'`), users, 20, 1.5)
	if n := queryInt(t, db, `SELECT count(*) FROM user_profiles WHERE locale NOT IN ('pt-BR', 'en')`); n != 0 {
		t.Errorf("%d users have another locale", n)
	}
	if n := queryInt(t, db, `SELECT count(*) FROM user_profiles
		WHERE whatsapp_jid !~ '^5511[0-9]{9}@s\.whatsapp\.net$' OR group_jid !~ '^1203630[0-9]{11}@g\.us$'`); n != 0 {
		t.Errorf("%d users have malformed JIDs", n)
	}
	if n := queryInt(t, db, `SELECT count(DISTINCT whatsapp_jid) FROM user_profiles`); n != queryInt(t, db,
		`SELECT count(whatsapp_jid) FROM user_profiles`) {
		t.Errorf("whatsapp_jids are not unique")
	}

	// Opt-out is independent of the category: about 5% within each state.
	if n := queryInt(t, db, `SELECT count(*) FROM user_profiles p JOIN user_engagement_states s USING (user_id)
		WHERE p.reengagement_opt_out AND s.state = 'active'`); math.Abs(float64(n)/float64(st.ByState["active"])-0.05) > 0.015 {
		t.Errorf("%d of %d active users opted out, want about 5%%", n, st.ByState["active"])
	}

	// Transactions: 40% of users with 3 in the last 7 days, 10% with 1 older one.
	if n := queryInt(t, db, `SELECT count(*) FROM transactions`); n != st.Transactions {
		t.Errorf("Stats.Transactions = %d, the table has %d", st.Transactions, n)
	}
	checkShare(t, "transactions per user", st.Transactions, users, 130, 4)
	checkShare(t, "users with 3 recent transactions", queryInt(t, db, `SELECT count(*) FROM (
		SELECT user_id FROM transactions GROUP BY user_id
		HAVING count(*) = 3 AND bool_and(created_at > $1::timestamptz - interval '7 days' AND created_at <= $1::timestamptz)) x`, asOf), users, 40, 1.5)
	checkShare(t, "users with 1 older transaction", queryInt(t, db, `SELECT count(*) FROM (
		SELECT user_id FROM transactions GROUP BY user_id
		HAVING count(*) = 1 AND bool_and(created_at BETWEEN $1::timestamptz - interval '30 days' AND $1::timestamptz - interval '8 days')) x`, asOf), users, 10, 1.5)
	if n := queryInt(t, db, `SELECT count(*) FROM transactions t LEFT JOIN user_profiles p USING (user_id) WHERE p.user_id IS NULL`); n != 0 {
		t.Errorf("%d transactions belong to no user", n)
	}

	// Nothing depends on the clock: every timestamp is at or before AsOf
	// except the pending reminders and open goodbyes' expiry.
	if n := queryInt(t, db, `SELECT count(*) FROM user_engagement_states
		WHERE last_activity_at > $1::timestamptz OR updated_at > $1::timestamptz OR goodbye_sent_at > $1::timestamptz OR updated_at < last_activity_at`, asOf); n != 0 {
		t.Errorf("%d states have timestamps after AsOf or updated_at before last_activity_at", n)
	}
	if n := queryInt(t, db, `SELECT count(*) FROM user_profiles p JOIN user_engagement_states s USING (user_id)
		WHERE p.created_at > s.last_activity_at`); n != 0 {
		t.Errorf("%d users were created after their last activity", n)
	}
}

func idsDigest(t *testing.T, db *pgxpool.Pool) string {
	t.Helper()
	var d string
	err := db.QueryRow(context.Background(),
		`SELECT md5(string_agg(user_id::text, ',' ORDER BY user_id)) FROM user_profiles`).Scan(&d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// rowsDigest hashes every column of every generated row.
func rowsDigest(t *testing.T, db *pgxpool.Pool) string {
	t.Helper()
	var d string
	err := db.QueryRow(context.Background(), `SELECT md5(
		(SELECT string_agg(p::text, ',' ORDER BY user_id) FROM user_profiles p) ||
		(SELECT string_agg(s::text, ',' ORDER BY user_id) FROM user_engagement_states s) ||
		(SELECT string_agg(t::text, ',' ORDER BY id) FROM transactions t))`).Scan(&d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestGenerateDeterministic(t *testing.T) {
	a, b, c := newDB(t), newDB(t), newDB(t)

	opts := seed.Options{Users: 2000, Seed: 42, AsOf: asOf}
	stA := generate(t, a, opts)
	// b gets the same rows inside the caller's transaction (Generate makes
	// a savepoint), and its settings are left as they were.
	ctx := context.Background()
	tx, err := b.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	settings := func() string {
		var s string
		if err := tx.QueryRow(ctx, `SELECT current_setting('jit') || ' ' || current_setting('work_mem')`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '5MB'`); err != nil {
		t.Fatal(err)
	}
	before := settings()
	stB := generate(t, tx, opts)
	if after := settings(); after != before {
		t.Errorf("Generate changed the caller's settings (jit, work_mem) from %s to %s", before, after)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// d gets them through a DB that cannot Begin: one statement, no transaction.
	d := newDB(t)
	stD := generate(t, execOnly{d}, opts)
	generate(t, c, seed.Options{Users: 2000, Seed: 43, AsOf: asOf})

	if idsDigest(t, a) != idsDigest(t, b) {
		t.Errorf("same seed, different user ids")
	}
	if dA, dB, dD := rowsDigest(t, a), rowsDigest(t, b), rowsDigest(t, d); dA != dB || dA != dD {
		t.Errorf("same seed, different rows: digests %s, %s, %s", dA, dB, dD)
	}
	if fmt.Sprint(stA) != fmt.Sprint(stB) || fmt.Sprint(stA) != fmt.Sprint(stD) {
		t.Errorf("same seed, different stats: %+v, %+v and %+v", stA, stB, stD)
	}
	if idsDigest(t, a) == idsDigest(t, c) {
		t.Errorf("seeds 42 and 43 gave the same user ids")
	}
	if n := queryInt(t, c, `SELECT count(*) FROM user_profiles WHERE user_id = $1`,
		queryString(t, a, `SELECT min(user_id::text) FROM user_profiles`)); n != 0 {
		t.Errorf("seeds 42 and 43 share user ids")
	}

	// The id scheme is the documented one: user i is md5('42:' || i), with
	// i in its JIDs.
	if n := queryInt(t, a, `SELECT count(*) FROM user_profiles p
		JOIN generate_series(0, 1999) AS g(i) ON p.user_id = md5('42:' || g.i)::uuid
		WHERE coalesce(p.whatsapp_jid = '5511' || lpad(g.i::text, 9, '0') || '@s.whatsapp.net', true)
		  AND coalesce(p.group_jid = '1203630' || lpad(g.i::text, 11, '0') || '@g.us', true)`); n != 2000 {
		t.Errorf("%d of 2000 users have id md5('42:' || i) and JIDs with i, want all", n)
	}

	// A second seed stacks on top of the first (disjoint ids); Stats
	// describes the tables.
	st := generate(t, a, seed.Options{Users: 500, Seed: 7, AsOf: asOf})
	if st.Users != 2500 {
		t.Errorf("Stats.Users after stacking seed 7 = %d, want 2500", st.Users)
	}
	if n := queryInt(t, a, `SELECT count(*) FROM user_profiles`); n != 2500 {
		t.Errorf("after stacking, %d users, want 2500", n)
	}
	// The same seed again collides on the primary key.
	if _, err := seed.Generate(ctx, a, seed.Options{Users: 10, Seed: 42, AsOf: asOf}); err == nil {
		t.Errorf("generating seed 42 twice into one database succeeded")
	}
}

// execOnly hides everything of a pool but its statements: no Begin.
type execOnly struct{ p *pgxpool.Pool }

func (e execOnly) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return e.p.Query(ctx, sql, args...)
}

func (e execOnly) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return e.p.Exec(ctx, sql, args...)
}

func (e execOnly) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return e.p.QueryRow(ctx, sql, args...)
}

func queryString(t *testing.T, db *pgxpool.Pool, sql string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestGenerateValidates(t *testing.T) {
	ctx := context.Background()
	for _, opts := range []seed.Options{
		{Users: 10, Seed: 1},                            // no AsOf
		{Users: -1, Seed: 1, AsOf: asOf},                // negative
		{Users: seed.MaxUsers + 1, Seed: 1, AsOf: asOf}, // too many
	} {
		if _, err := seed.Generate(ctx, nil, opts); err == nil {
			t.Errorf("Generate(%+v) succeeded", opts)
		}
	}
}

func TestGenerateZeroUsers(t *testing.T) {
	db := newDB(t)
	st := generate(t, db, seed.Options{Users: 0, Seed: 1, AsOf: asOf})
	if st.Users != 0 || st.Transactions != 0 || st.ByState == nil || st.ByCategory == nil {
		t.Errorf("Stats for 0 users = %+v", st)
	}
}

// BenchmarkGenerate times Generate on a fresh database per iteration; run
// with go test -run '^$' -bench Generate -benchtime 1x ./internal/seed.
// BENCH_USERS (make bench-smoke's 10,000) replaces its two sizes, 100,000
// and 1,000,000.
func BenchmarkGenerate(b *testing.B) {
	sizes := []int{100_000, 1_000_000}
	if v := os.Getenv("BENCH_USERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("BENCH_USERS=%q: want a positive number of users", v)
		}
		sizes = []int{n}
	}
	for _, users := range sizes {
		b.Run(fmt.Sprint(users), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				db := newDB(b)
				b.StartTimer()
				st, err := seed.Generate(context.Background(), db, seed.Options{Users: users, Seed: 1, AsOf: asOf})
				if err != nil {
					b.Fatal(err)
				}
				if st.Users != users {
					b.Fatalf("Stats.Users = %d", st.Users)
				}
			}
		})
	}
}
