package sqlfile_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Fields reads the statement's names as pgx does: a name it uses that no
// field carries fails, where pgx.NamedArgs would bind NULL (the planted
// typo, @limt, is caught), fields the statement does not use are fine,
// and quoted text, quoted identifiers and comments are not read as names.
func TestFieldsRefuseAParameterNoFieldCarries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const sql = `-- @not_a_parameter
SELECT @as_of::timestamptz, '@s.whatsapp.net', "@col", @limit::int /* @nor_this */, @as_of::timestamptz`
	args := sqlfile.Fields(struct {
		AsOf   string `db:"as_of"`
		Limit  int    `db:"limit"`
		Unused bool   `db:"unused"`
	}{"2026-11-25T00:00:00Z", 3, true})
	got, bound, err := args.RewriteQuery(ctx, nil, sql, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "$1::timestamptz") || !strings.Contains(got, "$2::int") || len(bound) != 2 {
		t.Errorf("rewrote to %q with %d arguments, want @as_of as $1 (twice) and @limit as $2", got, len(bound))
	}
	typo := strings.Replace(sql, "@limit", "@limt", 1)
	if _, _, err := args.RewriteQuery(ctx, nil, typo, nil); err == nil || !strings.Contains(err.Error(), "@limt") {
		t.Errorf("a statement using @limt, which is not passed: err %v, want one naming @limt", err)
	}
	pool, _ := pgtest.NewPool(t)
	if n, err := count(ctx, pool, "SELECT count(*) FROM generate_series(1, 10) i WHERE i <= @limt::int", pgx.NamedArgs{"limit": 3}); err != nil || n != 0 {
		t.Errorf("pgx.NamedArgs: %d, %v; want it to bind @limt as NULL and count 0, which is why Fields checks", n, err)
	}
}

// Fields binds a struct's tagged fields by name, its embedded structs'
// too; a nil embedded pointer carries no name, so a statement that uses
// one of its names fails, naming it, as Shared does.
func TestFieldsBindTaggedFieldsByName(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	type later struct {
		Limit int `db:"limit"`
	}
	type args struct {
		From   int `db:"from"`
		Unused int `db:"unused"`
		*later
	}
	const sql = `SELECT count(*) FROM generate_series(@from::int, 10) i WHERE i <= @limit::int`
	if n, err := count(ctx, pool, sql, sqlfile.Fields(args{From: 2, later: &later{Limit: 4}})); err != nil || n != 3 {
		t.Errorf("2 to 4: %d, %v; want 3", n, err)
	}
	_, err := count(ctx, pool, sql, sqlfile.Fields(args{From: 2}))
	if err == nil || !strings.Contains(err.Error(), "@limit") {
		t.Errorf("without the embedded struct that carries @limit: err %v, want one naming @limit", err)
	}
	if _, err := count(ctx, pool, sql, sqlfile.Fields(struct{ From int }{2})); err == nil || !strings.Contains(err.Error(), "db tag") {
		t.Errorf("a field without a tag: err %v, want one saying so", err)
	}
}

// count runs sql, a count(*), with args on pool and returns its one value
// (a row of more columns is an error).
func count(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (int, error) {
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return pgx.CollectOneRow(rows, pgx.RowTo[int])
}
