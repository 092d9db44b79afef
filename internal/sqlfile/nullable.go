package sqlfile

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A result column is NOT NULL only when proven; everything else is
// NULL-able (a pointer). The proofs read what the server says of the
// statement: its columns' description and its generic plan (EXPLAIN
// VERBOSE of the statement prepared with plan_cache_mode
// force_generic_plan, so that no parameter's value is folded in).
//
//   - A column of a table (the description's table OID and attribute
//     number, or alias.column in the plan for a table scan under that
//     alias) that its table declares NOT NULL, read where every row is
//     kept: never on a side of a join that can be NULL (the inner side of
//     a LEFT or anti join, the outer of a RIGHT, either of a FULL; a CTE
//     read there counts with every table its own plan scans). The planner
//     has already made inner joins of the outer joins whose NULL rows the
//     statement filters out, and left out those it does not need; a table
//     in no plan node (a view's column, a relation the planner found
//     empty) proves nothing.
//   - An expression, as the plan writes it: a literal other than NULL;
//     count (never NULL); IS [NOT] NULL / TRUE / FALSE; a cast, an
//     arithmetic or comparison operator, AND, OR, NOT, || or a CASE with
//     an ELSE, of proven operands (branches); COALESCE, GREATEST or LEAST
//     with one proven argument; a few of the server's functions of proven
//     arguments (now(), set_config, current_setting of one setting,
//     date_trunc, EXTRACT, …: neverNull); a parameter of the statement
//     whose Go type is neither a pointer nor a slice; a scalar subquery
//     that is one aggregate without GROUP BY or HAVING (it always returns
//     its one row) of a proven expression.
//
// Everything else is NULL-able: an aggregate other than count, any other
// scalar subquery (it may find no row), a function of the schema's (its
// body may change), a column a CTE or subquery computes, and any column
// its table leaves NULL-able. The file's "-- not null: name" is the
// author's word for what these rules cannot see.

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan, the fields the
// proofs read.
type planNode struct {
	NodeType    string     `json:"Node Type"`
	JoinType    string     `json:"Join Type"`
	Parent      string     `json:"Parent Relationship"`
	SubplanName string     `json:"Subplan Name"`
	CTEName     string     `json:"CTE Name"`
	Relation    string     `json:"Relation Name"`
	Schema      string     `json:"Schema"`
	Strategy    string     `json:"Strategy"`
	GroupKey    []string   `json:"Group Key"`
	Output      []string   `json:"Output"`
	Alias       string     `json:"Alias"`
	Filter      string     `json:"Filter"`
	OneTime     string     `json:"One-Time Filter"`
	Plans       []planNode `json:"Plans"`
}

// plan is a statement's generic plan, read for the proofs.
type plan struct {
	top *planNode
	// scanned holds every table a node scans, "schema.name"; outer those
	// scanned on a side of a join that can be NULL.
	scanned, outer map[string]bool
	// subplans are the InitPlans and SubPlans by name ("SubPlan 1",
	// "$2" for "InitPlan 1 (returns $2)", "CTE c" for a CTE).
	subplans map[string]*planNode
	// scans are the table scans by their alias in the plan (unique
	// there): the table, and whether it is read on a side that can be NULL.
	scans map[string]scan
	// ctx, conn and err serve the catalog lookups of a proof.
	ctx  context.Context
	conn *pgx.Conn
	err  error
	// params says of each of the statement's parameters ($1, …) whether
	// it is never NULL: its Go type is neither a pointer nor a slice.
	params []bool
}

type scan struct {
	schema, relation string
	nullSide         bool
}

const pgText = 25

const planStatement = "sqlfile_nullability"

// externOffset renumbers the statement's parameters for its plan ($1 is
// $1001 there): PostgreSQL 15 writes an InitPlan's value as $0, $1, … too,
// and the proofs must tell them apart.
const externOffset = 1000

var numbered = regexp.MustCompile(`\$([0-9]+)`)

// explain prepares sql as a named statement and reads its generic plan:
// the plan of any parameters' values, none folded in.
func explain(ctx context.Context, conn *pgx.Conn, sql string, oids []uint32, params []bool) (*plan, error) {
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		return nil, err
	}
	defer conn.Exec(ctx, "RESET plan_cache_mode") //nolint:errcheck // the generator's own session: a mode left set changes no result
	sql = numbered.ReplaceAllStringFunc(sql, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		return "$" + strconv.Itoa(n+externOffset)
	})
	types := make([]uint32, externOffset, externOffset+len(oids))
	for i := range types {
		types[i] = pgText // unused: the statement's own come after
	}
	if _, err := conn.PgConn().Prepare(ctx, planStatement, sql, append(types, oids...)); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	defer conn.PgConn().Deallocate(ctx, planStatement) //nolint:errcheck // dropped with the session otherwise
	args := strings.TrimSuffix(strings.Repeat("NULL, ", externOffset+len(params)), ", ")
	args = "(" + args + ")"
	var out []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (VERBOSE, FORMAT JSON) EXECUTE "+planStatement+args, pgx.QueryExecModeSimpleProtocol).Scan(&out); err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	var doc []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("explain: read the plan: %w", err)
	}
	if len(doc) != 1 {
		return nil, fmt.Errorf("explain: %d plans, want one", len(doc))
	}
	p := &plan{top: &doc[0].Plan, scanned: map[string]bool{}, outer: map[string]bool{}, subplans: map[string]*planNode{}, scans: map[string]scan{}, params: params}
	p.index(p.top)
	p.mark(p.top, false)
	return p, nil
}

var returns = regexp.MustCompile(`^InitPlan \d+ \(returns (\$\d+(?:,\$\d+)*)\)$`)

// index records every subplan by name.
func (p *plan) index(n *planNode) {
	if n.SubplanName != "" {
		p.subplans[n.SubplanName] = n
		if m := returns.FindStringSubmatch(n.SubplanName); m != nil {
			for _, param := range strings.Split(m[1], ",") {
				p.subplans[param] = n
			}
		}
	}
	for i := range n.Plans {
		p.index(&n.Plans[i])
	}
}

// mark records the tables n's subtree scans, as on a side that can be
// NULL when nullSide (or when a join below says so).
func (p *plan) mark(n *planNode, nullSide bool) {
	if n.Relation != "" {
		rel := n.Schema + "." + n.Relation
		p.scanned[rel] = true
		p.outer[rel] = p.outer[rel] || nullSide
		if n.Alias != "" {
			s, seen := p.scans[n.Alias]
			p.scans[n.Alias] = scan{n.Schema, n.Relation, nullSide || seen && (s.nullSide || s.schema+"."+s.relation != rel)}
		}
	}
	if n.NodeType == "CTE Scan" && nullSide {
		if cte := p.subplans["CTE "+n.CTEName]; cte != nil {
			p.mark(cte, true)
		}
	}
	for i := range n.Plans {
		c := &n.Plans[i]
		side := nullSide
		switch {
		case c.Parent == "Inner" && (n.JoinType == "Left" || n.JoinType == "Anti" || n.JoinType == "Full"):
			side = true
		case c.Parent == "Outer" && (n.JoinType == "Right" || n.JoinType == "Full" || n.JoinType == "Right Anti"):
			side = true
		case c.Parent != "InitPlan" && c.Parent != "SubPlan" && n.JoinType != "" &&
			n.JoinType != "Inner" && n.JoinType != "Semi" && n.JoinType != "Left" && n.JoinType != "Anti" && n.JoinType != "Right":
			side = true // a join this code does not know: either side may be NULL
		}
		p.mark(c, side)
	}
}

// columnNotNull says whether the table column f of the statement's
// result is proven NOT NULL: its table declares it and the plan never
// reads the table on a side that can be NULL.
func (p *plan) columnNotNull(ctx context.Context, conn *pgx.Conn, f pgconn.FieldDescription) (bool, error) {
	var rel string
	var notNull bool
	err := conn.QueryRow(ctx, `SELECT n.nspname || '.' || c.relname, a.attnotnull
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE a.attrelid = $1 AND a.attnum = $2`, f.TableOID, f.TableAttributeNumber).Scan(&rel, &notNull)
	if err != nil {
		return false, err
	}
	return notNull && p.scanned[rel] && !p.outer[rel], nil
}

// outputNotNull says whether the i-th output expression of the plan's top
// node is proven NOT NULL: an expression by the rules, a column by its
// table's scan (alias.column, or a bare column of the table a DML
// statement returns).
func (p *plan) outputNotNull(ctx context.Context, conn *pgx.Conn, i int) (bool, error) {
	if i >= len(p.top.Output) {
		return false, nil
	}
	p.ctx, p.conn, p.err = ctx, conn, nil
	proven := p.proven(p.top.Output[i], 0)
	return proven && p.err == nil, p.err
}

// columnProven says whether e, a column reference, is a column of a table
// scan that is not on a side that can be NULL and that its table declares
// NOT NULL.
func (p *plan) columnProven(e string) (bool, error) {
	ctx, conn := p.ctx, p.conn
	m := columnRef.FindStringSubmatch(e)
	if m == nil {
		return false, nil
	}
	var sc scan
	switch alias, ok := p.scans[unquote(m[1])]; {
	case m[1] == "" && p.top.NodeType == "ModifyTable":
		sc = scan{schema: p.top.Schema, relation: p.top.Relation}
	case m[1] != "" && ok && !alias.nullSide:
		sc = alias
	case m[1] == "" && len(p.scans) == 1:
		for _, only := range p.scans {
			sc = only
		}
		if sc.nullSide {
			return false, nil
		}
	default:
		return false, nil
	}
	var notNull bool
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT attnotnull FROM pg_attribute
  WHERE attrelid = to_regclass(format('%I.%I', $1::text, $2::text)) AND attname = $3 AND attnum > 0), false)`,
		sc.schema, sc.relation, unquote(m[2])).Scan(&notNull)
	return notNull, err
}

var columnRef = regexp.MustCompile(`^(?:([a-z_][a-z0-9_$]*|"(?:[^"]|"")+")\.)?([a-z_][a-z0-9_$]*|"(?:[^"]|"")+")$`)

func unquote(ident string) string {
	if strings.HasPrefix(ident, `"`) {
		return strings.ReplaceAll(ident[1:len(ident)-1], `""`, `"`)
	}
	return ident
}

var (
	literal   = regexp.MustCompile(`^(?:'(?:[^']|'')*'(?:::[a-z][a-z0-9_ ]*(?:\[\])?)?|-?[0-9]+(?:\.[0-9]+)?|true|false)$`)
	castOf    = regexp.MustCompile(`::(?:[a-z][a-z0-9_ ]*|"char")(?:\([0-9, ]+\))?(?:\[\])?$`)
	isTest    = regexp.MustCompile(` IS (?:NOT )?(?:NULL|TRUE|FALSE)$`)
	param     = regexp.MustCompile(`^\$([0-9]+)$`)
	subplanOf = regexp.MustCompile(`^SubPlan [0-9]+$`)
	call      = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\(`)
)

// neverNull are the functions that return a value whatever their
// arguments (count) or, given values, never NULL (the others strict
// functions of the server's own that the statements use; a function of
// the schema's is not here: its body may change).
var neverNull = map[string]bool{
	"count": true, "now": true, "clock_timestamp": true, "statement_timestamp": true, "transaction_timestamp": true,
	"pg_is_in_recovery": true, "pg_is_wal_replay_paused": true, "set_config": true, "date_trunc": true,
	"pg_try_advisory_lock": true, "pg_try_advisory_xact_lock": true, "pg_advisory_unlock": true,
}

// strictOperators are the operators whose value is never NULL when their
// operands are not: arithmetic, comparison, concatenation, AND, OR.
var strictOperators = []string{" + ", " - ", " * ", " / ", " = ", " <> ", " < ", " > ", " <= ", " >= ", " || ", " AND ", " OR "}

// proven says whether the deparsed expression e cannot be NULL, by the
// rules above; depth bounds the recursion.
func (p *plan) proven(e string, depth int) bool {
	if depth > 20 {
		return false
	}
	e = strings.TrimSpace(e)
	for len(e) > 1 && e[0] == '(' && closing(e, 0) == len(e)-1 {
		e = strings.TrimSpace(e[1 : len(e)-1])
	}
	switch {
	case strings.HasPrefix(e, "NULL"):
		return false
	case literal.MatchString(e):
		return true
	case subplanOf.MatchString(e):
		return p.oneRowOf(p.subplans[e], depth)
	case param.MatchString(e):
		// The statement's parameter (renumbered: externOffset) or an
		// InitPlan's value.
		if n, _ := strconv.Atoi(e[1:]); n > externOffset {
			return n-externOffset <= len(p.params) && p.params[n-externOffset-1]
		}
		return p.oneRowOf(p.subplans[e], depth)
	case strings.HasPrefix(e, "CASE ") && strings.HasSuffix(e, " END"):
		return p.caseProven(e[len("CASE "):len(e)-len(" END")], depth)
	case strings.HasPrefix(e, "NOT "):
		return p.proven(e[len("NOT "):], depth+1)
	}
	if m := call.FindStringSubmatch(e); m != nil {
		if ok, isCall := p.callProven(e, m[1], depth); isCall {
			return ok
		}
	}
	if m := castOf.FindStringIndex(e); m != nil && m[0] > 0 {
		inner := e[:m[0]]
		if inner[0] == '(' && closing(inner, 0) == len(inner)-1 || literal.MatchString(inner) || param.MatchString(inner) {
			return p.proven(inner, depth+1)
		}
	}
	if isTest.MatchString(e) && !hasTopLevel(e, " AND ", " OR ") {
		return true
	}
	if columnRef.MatchString(e) {
		ok, err := p.columnProven(e)
		p.err = cmp.Or(p.err, err)
		return ok
	}
	if ops := splitTopLevel(e, strictOperators); len(ops) > 1 {
		return !slices.ContainsFunc(ops, func(o string) bool { return !p.proven(o, depth+1) })
	}
	return false
}

// callProven says whether e, a call of the function fn (its arguments
// and, for count, a FILTER clause the whole rest of e), cannot be NULL;
// isCall is false when e is more than the call, which proven then reads
// by its other rules.
func (p *plan) callProven(e, fn string, depth int) (notNull, isCall bool) {
	end := closing(e, len(fn))
	rest := strings.TrimSpace(e[end+1:])
	if filter, ok := strings.CutPrefix(rest, "FILTER "); ok && fn == "count" && strings.HasPrefix(filter, "(") && closing(filter, 0) == len(filter)-1 {
		rest = ""
	}
	if end > 0 && rest == "" {
		var args []string
		if list := strings.TrimSpace(e[len(fn)+1 : end]); list != "" {
			args = topLevel(list)
		}
		switch fn {
		case "count":
			return true, true
		case "COALESCE", "GREATEST", "LEAST": // NULL only when every argument is
			return slices.ContainsFunc(args, func(a string) bool { return p.proven(a, depth+1) }), true
		case "EXTRACT": // EXTRACT(field FROM value)
			_, value, ok := strings.Cut(e[len(fn)+1:end], " FROM ")
			return ok && p.proven(value, depth+1), true
		case "current_setting": // one argument: an unknown setting is an error
			return len(args) == 1 && p.proven(args[0], depth+1), true
		default:
			return neverNull[fn] && !slices.ContainsFunc(args, func(a string) bool { return !p.proven(a, depth+1) }), true
		}
	}
	return false, false
}

// caseProven says whether a CASE's every THEN and its ELSE are proven (no
// ELSE is NULL).
func (p *plan) caseProven(body string, depth int) bool {
	parts := splitTopLevel(body, []string{"WHEN ", " THEN ", " ELSE "})
	if len(parts) < 4 || !hasTopLevel(body, " ELSE ") {
		return false
	}
	// parts: the subject (or ""), a condition and its value per WHEN, the
	// ELSE's value.
	for i := 2; i < len(parts)-1; i += 2 {
		if !p.proven(parts[i], depth+1) {
			return false
		}
	}
	return p.proven(parts[len(parts)-1], depth+1)
}

// oneRowOf says whether a scalar subquery's plan n always returns one row
// whose value is proven: a plain aggregate (no GROUP BY, no HAVING) of
// one.
func (p *plan) oneRowOf(n *planNode, depth int) bool {
	for n != nil && n.NodeType == "Result" && n.OneTime == "" && len(n.Plans) == 1 && len(n.Output) == 1 && n.Output[0] == n.Plans[0].firstOutput() {
		n = &n.Plans[0]
	}
	// A HAVING is the aggregate's filter: it may leave no row.
	if n == nil || n.NodeType != "Aggregate" || n.Strategy != "Plain" || len(n.GroupKey) > 0 || n.Filter != "" || len(n.Output) != 1 {
		return false
	}
	return p.proven(n.Output[0], depth+1)
}

func (n *planNode) firstOutput() string {
	if len(n.Output) == 0 {
		return ""
	}
	return n.Output[0]
}

// walk calls visit with the index and the parenthesis depth of each byte
// of e from start on that is outside quotes (a parenthesis counts inside
// the pair it opens or closes), until visit returns false.
func walk(e string, start int, visit func(i, depth int) bool) {
	depth, quoted := 0, false
	for i := start; i < len(e); i++ {
		switch c := e[i]; {
		case c == '\'':
			quoted = !quoted
			continue
		case quoted:
			continue
		case c == '(':
			depth++
		case c == ')':
			if !visit(i, depth) {
				return
			}
			depth--
			continue
		}
		if !visit(i, depth) {
			return
		}
	}
}

// closing is the index of the parenthesis closing the one at open in e
// (quotes skipped), or -1.
func closing(e string, open int) int {
	at := -1
	walk(e, open, func(i, depth int) bool {
		if e[i] == ')' && depth == 1 {
			at = i
			return false
		}
		return true
	})
	return at
}

// topLevel splits a list of arguments at its top-level commas.
func topLevel(list string) []string { return splitTopLevel(list, []string{","}) }

// hasTopLevel says whether e holds one of words outside parentheses and
// quotes.
func hasTopLevel(e string, words ...string) bool { return len(splitTopLevel(e, words)) > 1 }

// splitTopLevel splits e at each of seps found outside parentheses and
// quotes.
func splitTopLevel(e string, seps []string) []string {
	var parts []string
	begin, skip := 0, 0
	walk(e, 0, func(i, depth int) bool {
		if i < skip || depth != 0 {
			return true
		}
		for _, sep := range seps {
			if strings.HasPrefix(e[i:], sep) {
				parts = append(parts, e[begin:i])
				begin, skip = i+len(sep), i+len(sep)
				break
			}
		}
		return true
	})
	return append(parts, e[begin:])
}
