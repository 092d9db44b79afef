package sqlfile

import (
	"context"
	"fmt"
	"regexp"
	"sync"

	"github.com/jackc/pgx/v5"
)

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
