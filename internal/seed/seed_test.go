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
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
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
	pop := fixture.PopulationOf(t, db, fixture.Census{AsOf: asOf})
	for table, n := range map[string]int{"user_profiles": pop.Users, "user_engagement_states": fixture.CountStates(t, db, fixture.States{})} {
		if n != users {
			t.Errorf("%s has %d rows, want %d", table, n, users)
		}
	}

	// Categories, classified here from the rows with the spec's own ranges
	// (independently of Stats), and compared with Stats.ByCategory.
	cats := []struct {
		name  string
		n     int
		share float64
	}{
		{seed.CategoryInactive, pop.Inactive, 30},
		{seed.CategoryGoodbyeExpired, pop.GoodbyeExpired, 10},
		{seed.CategoryGoodbyeOpen, pop.GoodbyeOpen, 2},
		{seed.CategoryRemindDue, pop.RemindDue, 5},
		{seed.CategoryRemindPending, pop.RemindPending, 2},
		{seed.CategoryHelpFlow, pop.HelpFlow, 3},
		{seed.CategoryDormant, pop.Dormant, 5},
		{seed.CategoryRecent, pop.Recent, 43},
	}
	sum := 0
	for _, c := range cats {
		n := c.n
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
		if n := fixture.CountStates(t, db, fixture.States{State: state}); n != st.ByState[state] {
			t.Errorf("Stats.ByState[%s] = %d, the table has %d", state, st.ByState[state], n)
		}
	}

	// Flags.
	checkShare(t, "opted out", st.OptedOut, users, 5, 1)
	if pop.OptedOut != st.OptedOut {
		t.Errorf("Stats.OptedOut = %d, the table has %d", st.OptedOut, pop.OptedOut)
	}
	checkShare(t, "group with group_jid", pop.GroupWithJID, users, 10, 1.5)
	checkShare(t, "group without group_jid", pop.GroupWithoutJID, users, 1, 0.5)
	checkShare(t, "no destination", pop.NoDestination, users, 0.5, 0.3)
	if pop.GroupWithoutWhatsappJID != 0 {
		t.Errorf("%d group users have no whatsapp_jid, want 0", pop.GroupWithoutWhatsappJID)
	}
	checkShare(t, "locale en", pop.LocaleEn, users, 20, 1.5)
	if pop.LocaleOther != 0 {
		t.Errorf("%d users have another locale", pop.LocaleOther)
	}
	if pop.MalformedJids != 0 {
		t.Errorf("%d users have malformed JIDs", pop.MalformedJids)
	}
	if pop.DistinctWhatsappJids != pop.WhatsappJids {
		t.Errorf("whatsapp_jids are not unique")
	}

	// Opt-out is independent of the category: about 5% within each state.
	if n := pop.ActiveOptedOut; math.Abs(float64(n)/float64(st.ByState["active"])-0.05) > 0.015 {
		t.Errorf("%d of %d active users opted out, want about 5%%", n, st.ByState["active"])
	}

	// Transactions: 40% of users with 3 in the last 7 days, 10% with 1 older one.
	if pop.Transactions != st.Transactions {
		t.Errorf("Stats.Transactions = %d, the table has %d", st.Transactions, pop.Transactions)
	}
	checkShare(t, "transactions per user", st.Transactions, users, 130, 4)
	checkShare(t, "users with 3 recent transactions", pop.ThreeRecentTransactions, users, 40, 1.5)
	checkShare(t, "users with 1 older transaction", pop.OneOlderTransaction, users, 10, 1.5)
	if pop.OrphanTransactions != 0 {
		t.Errorf("%d transactions belong to no user", pop.OrphanTransactions)
	}

	// Nothing depends on the clock: every timestamp is at or before AsOf
	// except the pending reminders and open goodbyes' expiry.
	if pop.AfterAsOf != 0 {
		t.Errorf("%d states have timestamps after AsOf or updated_at before last_activity_at", pop.AfterAsOf)
	}
	if pop.CreatedAfterActivity != 0 {
		t.Errorf("%d users were created after their last activity", pop.CreatedAfterActivity)
	}
}

// population is what db holds after seeding, numbered as seed 42 numbers
// its first 2000 users, and with users among them.
func population(t *testing.T, db *pgxpool.Pool, users ...string) fixture.Population {
	t.Helper()
	return fixture.PopulationOf(t, db, fixture.Census{AsOf: asOf, Seed: 42, Numbered: 2000, Users: users})
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
		return fixture.Setting(t, tx, "jit") + " " + fixture.Setting(t, tx, "work_mem")
	}
	fixture.SetLocal(t, tx, "work_mem", "5MB")
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

	popA, popB, popD, popC := population(t, a), population(t, b), population(t, d), population(t, c)
	if popA.IDsDigest != popB.IDsDigest {
		t.Errorf("same seed, different user ids")
	}
	if dA, dB, dD := popA.RowsDigest, popB.RowsDigest, popD.RowsDigest; dA != dB || dA != dD {
		t.Errorf("same seed, different rows: digests %s, %s, %s", dA, dB, dD)
	}
	if fmt.Sprint(stA) != fmt.Sprint(stB) || fmt.Sprint(stA) != fmt.Sprint(stD) {
		t.Errorf("same seed, different stats: %+v, %+v and %+v", stA, stB, stD)
	}
	if popA.IDsDigest == popC.IDsDigest {
		t.Errorf("seeds 42 and 43 gave the same user ids")
	}
	if n := population(t, c, popA.FirstID).Among; n != 0 {
		t.Errorf("seeds 42 and 43 share user ids")
	}

	// The id scheme is the documented one: user i is md5('42:' || i), with
	// i in its JIDs.
	if n := popA.Numbered; n != 2000 {
		t.Errorf("%d of 2000 users have id md5('42:' || i) and JIDs with i, want all", n)
	}

	// A second seed stacks on top of the first (disjoint ids); Stats
	// describes the tables.
	st := generate(t, a, seed.Options{Users: 500, Seed: 7, AsOf: asOf})
	if st.Users != 2500 {
		t.Errorf("Stats.Users after stacking seed 7 = %d, want 2500", st.Users)
	}
	if n := population(t, a).Users; n != 2500 {
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
