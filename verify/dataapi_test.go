package verify_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
	"github.com/engagement-scheduler/engagement/verify"
)

// botAsOf is when the bot's rows (botdb) are as of.
var botAsOf = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// migratedPool runs migrate up on the database at url (the bot's, or an
// empty Supabase project) and returns a pool on it.
func migratedPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	m, err := migrations.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Up()
	m.Close()
	if err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	pool, err := postgres.Open(ctx, url, "engagementctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Issue 30: on a Supabase project every table, sequence and function the
// scheduler creates in public is granted to the Data API roles by default,
// and a table without row level security is then open to anyone holding
// the public anon key. Migration 28 closes them; data_api_closed reports
// whatever opens one again, naming the object, the role and why. On the
// bot's database the bot's adopted queue keeps the privileges Supabase
// granted anon and authenticated, closed by row level security with no
// policy: exempt, until a policy lets one of them in.
func TestVerifyDataAPIClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// supabase is an empty Supabase project (the scheduler creates
		// every table); otherwise the bot's database with its rows.
		supabase bool
		// breakIt is run as the owner after migrate up.
		breakIt []string
		// want is the check's examples, all of them; none: it holds.
		want   []string
		exempt int64
	}{
		{name: "the bot's database after migrate up", exempt: 2},
		{name: "an empty Supabase project after migrate up", supabase: true},
		{
			name: "a table granted to anon without row level security",
			breakIt: []string{
				`GRANT SELECT ON engagement_job_runs TO anon`,
				`ALTER TABLE engagement_job_runs DISABLE ROW LEVEL SECURITY`,
			},
			want:   []string{"engagement_job_runs: anon may SELECT, row level security off"},
			exempt: 2,
		},
		{
			name:    "a function granted to authenticated",
			breakIt: []string{`GRANT EXECUTE ON FUNCTION engagement_zone(text) TO authenticated`},
			want: []string{"engagement_zone(text): authenticated may EXECUTE, " +
				"a plain function (SECURITY INVOKER: runs as its caller)"},
			exempt: 2,
		},
		{
			name: "a SECURITY DEFINER function executable by PUBLIC",
			breakIt: []string{
				`CREATE FUNCTION engagement_test_definer() RETURNS int LANGUAGE sql SECURITY DEFINER AS 'SELECT 1'`,
				`GRANT EXECUTE ON FUNCTION engagement_test_definer() TO PUBLIC`,
			},
			want: []string{
				"engagement_test_definer(): anon may EXECUTE, SECURITY DEFINER (runs as its owner, past row level security)",
				"engagement_test_definer(): authenticated may EXECUTE, SECURITY DEFINER (runs as its owner, past row level security)",
			},
			exempt: 2,
		},
		{
			name:    "a policy on the bot's adopted queue",
			breakIt: []string{`CREATE POLICY p ON engagement_message_queue FOR INSERT TO anon WITH CHECK (true)`},
			want: []string{"engagement_message_queue: anon may INSERT, " +
				"row level security on, but policy p (INSERT) applies to anon"},
			exempt: 1, // authenticated: no policy lets it in
		},
		{
			name: "a policy for PUBLIC on a table of the scheduler's",
			breakIt: []string{
				`GRANT SELECT, UPDATE ON engagement_state_transitions TO authenticated`,
				`CREATE POLICY everyone ON engagement_state_transitions USING (true)`,
			},
			want: []string{"engagement_state_transitions: authenticated may SELECT, UPDATE, " +
				"row level security on, but policy everyone (ALL) applies to PUBLIC"},
			exempt: 2,
		},
		{
			name:     "a sequence granted to anon",
			supabase: true,
			breakIt:  []string{`GRANT USAGE, SELECT ON SEQUENCE engagement_job_runs_id_seq TO anon`},
			want:     []string{"engagement_job_runs_id_seq: anon may USAGE, SELECT the sequence"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var url string
			if tt.supabase {
				url = botdb.NewSupabaseDatabase(t)
			} else {
				url = botdb.NewDatabaseWithRows(t, botAsOf)
			}
			pool := migratedPool(t, url)
			for _, stmt := range tt.breakIt {
				fixture.Exec(t, pool, stmt)
			}
			rep, err := verify.Run(ctx, pool, verify.Config{AsOf: botAsOf})
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			c := checkOf(t, rep, verify.CheckDataAPIClosed)
			broken := slices.Contains(rep.Broken, verify.CheckDataAPIClosed)
			if len(tt.want) == 0 {
				if !c.OK || broken || c.Violations != 0 || len(c.Examples) != 0 || c.Exempt != tt.exempt {
					t.Fatalf("%s: ok %v (broken %v), %d violations %q, %d exempt; want it to hold, %d exempt",
						c.Name, c.OK, broken, c.Violations, c.Examples, c.Exempt, tt.exempt)
				}
				return
			}
			if c.OK || rep.OK || !broken || c.Violations != int64(len(tt.want)) || !slices.Equal(c.Examples, tt.want) || c.Exempt != tt.exempt {
				t.Fatalf("%s: ok %v (broken %v), %d violations %q, %d exempt; want broken with examples %q, %d exempt",
					c.Name, c.OK, broken, c.Violations, c.Examples, c.Exempt, tt.want, tt.exempt)
			}
		})
	}
}

// On a plain PostgreSQL there is no Data API: without the roles anon and
// authenticated nothing can reach the scheduler through it, whatever
// PUBLIC may do, and data_api_closed holds. The shared test server may
// have the roles (botdb creates them), so this runs on a cluster of its own.
func TestVerifyDataAPIClosedWithoutTheRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := pgtest.NewCluster(t)
	pool, err := postgres.Open(ctx, cluster.URL, "engagementctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if n := fixture.DataAPIRoles(t, pool); n != 0 {
		t.Fatalf("a new cluster has %d of the Data API roles, want none", n)
	}
	fixture.Exec(t, pool, publicDataAPI)
	rep, err := verify.Run(ctx, pool, verify.Config{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if c := checkOf(t, rep, verify.CheckDataAPIClosed); !c.OK || c.Violations != 0 || len(c.Examples) != 0 || c.Exempt != 0 {
		t.Fatalf("%s without the Data API roles: ok %v, %d violations %q, %d exempt; want it to hold, nothing exempt",
			c.Name, c.OK, c.Violations, c.Examples, c.Exempt)
	}
}
