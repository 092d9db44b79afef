package sqlfile

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// Params are a statement's arguments, a generated struct with one field per
// named parameter (@as_of is AsOf), in the order of its $1, $2, ….
type Params interface{ Args() []any }

// Row is a pointer to a generated struct with one field per result column,
// named after the column: Dest gives Scan its fields in the columns' order.
type Row[R any] interface {
	*R
	Dest() []any
}

// None is the Params of a statement without parameters and the row of one
// that returns nothing.
type None struct{}

// Args returns no arguments.
func (None) Args() []any { return nil }

// Dest returns no destinations.
func (*None) Dest() []any { return nil }

// Statement is one file of a package's queries/ folder, made typed by
// `make sql` (internal/sqlfile/generate.go): P its parameters, R its row.
// The generated file (queries.gen.go) declares one per file; the SQL is
// the file's, its named parameters numbered. A renamed parameter or
// column renames a field, and a reordered column reorders Dest, so what
// drifts from the statement fails to compile, not at run time;
// TestStatementsAreGenerated fails when the generated file is older than
// the statement.
type Statement[P Params, R any, PR Row[R]] struct {
	Name string // the file's name, queries/<Name>.sql
	SQL  string

	mode pgx.QueryExecMode // 0: the pool's
}

// Load returns the statement in fsys's queries/<name>.sql (the package's
// embedded files) with its named parameters numbered as pgx numbers them,
// which must be params, in that order: make sql declares each statement
// of queries.gen.go so, and the SQL stays in its file alone. A file edited
// since make sql typed it (a parameter added, dropped or moved) panics
// here, when its package starts, in its every test and binary, rather
// than binding a value to the wrong parameter.
func Load[P Params, R any, PR Row[R]](fsys fs.FS, name string, params ...string) Statement[P, R, PR] {
	sql, names, err := parameters(context.Background(), nil, Must(fsys, name))
	if err != nil {
		panic(fmt.Sprintf("sqlfile: queries/%s.sql: %v", name, err))
	}
	if !slices.Equal(names, params) {
		panic(fmt.Sprintf("sqlfile: queries/%s.sql takes @%s, its generated code @%s: run make sql",
			name, strings.Join(names, ", @"), strings.Join(params, ", @")))
	}
	return Statement[P, R, PR]{Name: name, SQL: sql}
}

// WithMode returns the statement run in mode (e.g. pgx.QueryExecModeExec
// behind a transaction-mode pooler).
func (s Statement[P, R, PR]) WithMode(mode pgx.QueryExecMode) Statement[P, R, PR] {
	s.mode = mode
	return s
}

func (s Statement[P, R, PR]) args(p P) []any {
	args := p.Args()
	if s.mode == 0 {
		return args
	}
	return append([]any{s.mode}, args...)
}

// Exec runs the statement, discarding any row.
func (s Statement[P, R, PR]) Exec(ctx context.Context, db postgres.Querier, p P) (pgconn.CommandTag, error) {
	return db.Exec(ctx, s.SQL, s.args(p)...)
}

// One returns the statement's first row, pgx.ErrNoRows when it has none.
func (s Statement[P, R, PR]) One(ctx context.Context, db postgres.Querier, p P) (R, error) {
	var r R
	err := db.QueryRow(ctx, s.SQL, s.args(p)...).Scan(PR(&r).Dest()...)
	return r, err
}

// All returns every row of the statement.
func (s Statement[P, R, PR]) All(ctx context.Context, db postgres.Querier, p P) ([]R, error) {
	rows, err := db.Query(ctx, s.SQL, s.args(p)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (R, error) {
		var r R
		err := row.Scan(PR(&r).Dest()...)
		return r, err
	})
}

// Each calls fn with each row of the statement in turn, without keeping
// them: for results too large to hold. The row is reused; fn copies what
// it keeps. An error from fn stops the reading and is returned.
func (s Statement[P, R, PR]) Each(ctx context.Context, db postgres.Querier, p P, fn func(*R) error) error {
	rows, err := db.Query(ctx, s.SQL, s.args(p)...)
	if err != nil {
		return err
	}
	var r R
	_, err = pgx.ForEachRow(rows, PR(&r).Dest(), func() error { return fn(&r) })
	return err
}

// QueueOne queues the statement on b; when the batch runs, its first row
// is scanned into dst.
func (s Statement[P, R, PR]) QueueOne(b *pgx.Batch, p P, dst *R) {
	b.Queue(s.SQL, p.Args()...).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(PR(dst).Dest()...); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		return nil
	})
}

// QueueAll queues the statement on b; when the batch runs, its rows are
// appended to *dst.
func (s Statement[P, R, PR]) QueueAll(b *pgx.Batch, p P, dst *[]R) {
	b.Queue(s.SQL, p.Args()...).Query(func(rows pgx.Rows) error {
		var err error
		*dst, err = pgx.AppendRows(*dst, rows, func(row pgx.CollectableRow) (R, error) {
			var r R
			err := row.Scan(PR(&r).Dest()...)
			return r, err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		return nil
	})
}

// QueueExec queues the statement on b, discarding any row.
func (s Statement[P, R, PR]) QueueExec(b *pgx.Batch, p P) {
	b.Queue(s.SQL, p.Args()...)
}

// Bound is a statement with its arguments, e.g. for a test to EXPLAIN.
type Bound struct {
	Name string
	SQL  string
	Args []any
}

// Bind returns the statement with p's arguments.
func (s Statement[P, R, PR]) Bind(p P) Bound {
	return Bound{Name: s.Name, SQL: s.SQL, Args: p.Args()}
}
