package botdb

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Snapshot is what the bot defined and wrote, as it was when taken: for
// each of its tables, its rows (in its own columns), columns, constraints,
// indexes, policies, row level security and grants. The scheduler may add
// columns, indexes and rows of its own; Changes compares only what the
// snapshot holds.
type Snapshot struct {
	columns     map[string][]string // table -> the bot's columns
	indexes     map[string][]string // table -> the bot's indexes
	constraints map[string][]string // table -> the bot's constraints
	facts       map[string]string   // "table: what" -> its value
}

// Take reads a Snapshot of the bot's tables on q.
func Take(ctx context.Context, q *pgx.Conn) (Snapshot, error) {
	s := Snapshot{columns: map[string][]string{}, indexes: map[string][]string{}, constraints: map[string][]string{}}
	names := []struct {
		into  map[string][]string
		query string
	}{
		{s.columns, `SELECT attname::text FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`},
		{s.indexes, `SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = $1::regclass`},
		{s.constraints, `SELECT conname::text FROM pg_constraint WHERE conrelid = $1::regclass`},
	}
	for _, t := range Tables {
		for _, n := range names {
			rows, err := q.Query(ctx, n.query, t)
			if err != nil {
				return Snapshot{}, err
			}
			if n.into[t], err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return Snapshot{}, fmt.Errorf("the names in %s: %w", t, err)
			}
		}
	}
	facts, err := s.read(ctx, q)
	s.facts = facts
	return s, err
}

// Changes lists what differs now on q from the snapshot, one line each.
func (s Snapshot) Changes(ctx context.Context, q *pgx.Conn) ([]string, error) {
	now, err := s.read(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(s.facts)) {
		if now[k] != s.facts[k] {
			out = append(out, fmt.Sprintf("%s: was %.300s, is now %.300s", k, s.facts[k], now[k]))
		}
	}
	return out, nil
}

func (s Snapshot) read(ctx context.Context, q *pgx.Conn) (map[string]string, error) {
	facts := map[string]string{}
	for _, t := range Tables {
		cols := make([]string, len(s.columns[t]))
		for i, c := range s.columns[t] {
			cols[i] = pgx.Identifier{c}.Sanitize()
		}
		list := strings.Join(cols, ", ")
		// Each statement's first parameter is the table ($1); the
		// names it compares with, if any, come second ($2).
		queries := map[string]struct {
			sql  string
			args []any
		}{
			"rows": {sql: `SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY to_jsonb(x)::text), '[]')::text
			           FROM (SELECT ` + list + ` FROM ` + pgx.Identifier{t}.Sanitize() + `) x WHERE $1::text IS NOT NULL`},
			"columns": {sql: `SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod) || CASE WHEN attnotnull THEN ' NOT NULL' ELSE '' END
			                  || coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), ''), ', ' ORDER BY attnum)
			              FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
			             WHERE a.attrelid = $1::regclass AND attname = ANY($2::text[]) AND NOT attisdropped`, args: []any{t, s.columns[t]}},
			"constraints": {sql: `SELECT string_agg(conname || ' ' || pg_get_constraintdef(oid), '; ' ORDER BY conname)
			                  FROM pg_constraint WHERE conrelid = $1::regclass AND conname = ANY($2::text[])`, args: []any{t, s.constraints[t]}},
			"indexes": {sql: `SELECT string_agg(pg_get_indexdef(indexrelid) || CASE WHEN indisvalid THEN '' ELSE ' INVALID' END, '; ' ORDER BY indexrelid::regclass::text)
			              FROM pg_index WHERE indrelid = $1::regclass AND indexrelid::regclass::text = ANY($2::text[])`, args: []any{t, s.indexes[t]}},
			"policies": {sql: `SELECT coalesce(string_agg(polname || ' ' || coalesce(pg_get_expr(polqual, polrelid), ''), '; ' ORDER BY polname), '')
			               FROM pg_policy WHERE polrelid = $1::regclass`},
			"security": {sql: `SELECT relrowsecurity::text || ' ' || relforcerowsecurity::text || ' ' || coalesce(relacl::text, '') || ' owner ' || relowner::regrole::text
			               FROM pg_class WHERE oid = $1::regclass`},
		}
		for what, query := range queries {
			args := query.args
			if args == nil {
				args = []any{t}
			}
			// One value each, whatever its name: pgx.RowTo fails on a
			// row of more than one column.
			rows, err := q.Query(ctx, query.sql, args...)
			if err != nil {
				return nil, fmt.Errorf("%s of %s: %w", what, t, err)
			}
			v, err := pgx.CollectOneRow(rows, pgx.RowTo[*string])
			if err != nil {
				return nil, fmt.Errorf("%s of %s: %w", what, t, err)
			}
			if v != nil {
				facts[t+": "+what] = *v
			}
		}
	}
	return facts, nil
}
