package sqlfile

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Args are a statement's named arguments (@as_of), as pgx.NamedArgs binds
// them, except that they must match the statement exactly: a name the
// statement uses and Args does not hold is an error, and so is a name Args
// holds that the statement does not use. pgx.NamedArgs binds a missing name
// as NULL, so a typo in a .sql file (or a key the caller forgot) would
// quietly turn a filter off; and an argument nobody reads is a typo on the
// Go side, or a filter the statement lost. Arguments that several
// statements share on purpose are Shared.
type Args map[string]any

// RewriteQuery implements pgx.QueryRewriter: it checks that a holds exactly
// the names sql uses, then binds them as pgx.StrictNamedArgs does.
func (a Args) RewriteQuery(ctx context.Context, conn *pgx.Conn, sql string, args []any) (string, []any, error) {
	used, err := names(ctx, sql)
	if err != nil {
		return "", nil, err
	}
	if len(a) > len(used) {
		var unused []string
		for name := range a {
			if !slices.Contains(used, name) {
				unused = append(unused, "@"+name)
			}
		}
		slices.Sort(unused)
		return "", nil, fmt.Errorf("the caller passes %s, which the statement does not use", strings.Join(unused, ", "))
	}
	return bind(ctx, conn, sql, args, used, a)
}

// Shared are named arguments several statements share (a job's run, its
// step's): a name a statement uses must be there, as with Args, but a
// Shared may hold names one statement does not use.
type Shared map[string]any

// RewriteQuery implements pgx.QueryRewriter: it checks that every name sql
// uses is in a, then binds them as pgx.StrictNamedArgs does.
func (a Shared) RewriteQuery(ctx context.Context, conn *pgx.Conn, sql string, args []any) (string, []any, error) {
	used, err := names(ctx, sql)
	if err != nil {
		return "", nil, err
	}
	return bind(ctx, conn, sql, args, used, a)
}

// bind binds the names used from a, failing on the first a lacks.
func bind(ctx context.Context, conn *pgx.Conn, sql string, args []any, used []string, a map[string]any) (string, []any, error) {
	bound := make(pgx.StrictNamedArgs, len(used))
	for _, name := range used {
		v, ok := a[name]
		if !ok {
			return "", nil, fmt.Errorf("the statement uses @%s, which its caller does not pass", name)
		}
		bound[name] = v
	}
	return bound.RewriteQuery(ctx, conn, sql, args)
}

// namesUsed caches, per statement, the names it uses.
var namesUsed sync.Map // sql → []string

// names returns the named parameters sql uses, as pgx's parser reads them
// (strings, quoted identifiers and comments skipped), in the order pgx
// numbers them. Once per statement.
func names(ctx context.Context, sql string) ([]string, error) {
	if v, ok := namesUsed.Load(sql); ok {
		return v.([]string), nil
	}
	_, list, err := parameters(ctx, nil, sql)
	if err != nil {
		return nil, fmt.Errorf("read the statement's parameters: %w", err)
	}
	namesUsed.Store(sql, list)
	return list, nil
}

// mention is a named parameter's spelling, @as_of, wherever it appears.
var mention = regexp.MustCompile(`@([A-Za-z_][A-Za-z0-9_]*)`)

// parameters returns src with its named parameters numbered ($1, $2, …)
// and their names in that order, as pgx binds them at run time: every
// @word of the text, comments and strings included, is offered to pgx's
// own rewriting with its name as its value, and the arguments that come
// back are the parameters pgx found, in the order it numbered them.
func parameters(ctx context.Context, conn *pgx.Conn, src string) (string, []string, error) {
	offered := pgx.NamedArgs{}
	for _, m := range mention.FindAllStringSubmatch(src, -1) {
		offered[m[1]] = m[1]
	}
	sql, args, err := offered.RewriteQuery(ctx, conn, src, nil)
	if err != nil {
		return "", nil, err
	}
	list := make([]string, len(args))
	for i, a := range args {
		list[i] = a.(string)
	}
	return sql, list, nil
}
