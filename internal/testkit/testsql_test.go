package testkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The tests' untyped SQL (issue 60): calls that pass SQL text written in
// place, and rows read by position. Both may only go down: a change that
// brings them under a ceiling lowers it, one that goes over it fails here.
// Issue 60's goal is at most 50 and 20, in tests and the test kit alike,
// fixtures going through typed statements (make sql) instead.
const (
	maxInlineSQL       = 13
	maxPositionalReads = 9
)

// sqlStart is how SQL text begins: a statement's first word, then a
// space, a parenthesis, a semicolon or the end ("table.audit", a CSS
// selector, is not SQL).
var sqlStart = regexp.MustCompile(`(?i)^\s*(--[^\n]*\n\s*)*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP|TRUNCATE|VACUUM|ANALYZE|SET|RESET|BEGIN|COMMIT|ROLLBACK|LOCK|DO|CALL|GRANT|REVOKE|COPY|NOTIFY|LISTEN|CHECKPOINT|REFRESH|COMMENT|EXPLAIN|TABLE|VALUES)([\s;(]|$)`)

// sqlBody is what a statement written in lower case has beyond its first
// word, and a description ("lock message %s", "set the %s budget") has not.
var sqlBody = regexp.MustCompile(`(?i)^\S+\s+(database|table|role|function|index|extension|schema|or|unique|temp|temporary|\*)\s|\s(from|into|set|values|where)\s|\$1`)

// isSQL reports whether s is SQL text: it begins as a statement does, and
// either its first word is in capitals (the house's SQL) and it is a
// statement's whole text (a single word only when a statement of its own,
// "COMMIT"), or it reads like a statement in lower case.
func isSQL(s string) bool {
	if !sqlStart.MatchString(s) {
		return false
	}
	t := strings.TrimSpace(s)
	first := strings.Fields(t)[0]
	if first == strings.ToUpper(first) {
		return true
	}
	return strings.ContainsAny(t, " \t\n") && sqlBody.MatchString(t)
}

// messageFuncs take a message, not SQL: a format string that begins with
// "drop" or "lock" is a test's complaint.
var messageFuncs = map[string]bool{
	"Errorf": true, "Fatalf": true, "Logf": true, "Skipf": true, "Error": true, "Fatal": true, "Log": true,
	"Printf": true, "Println": true, "Print": true, "Fprintf": true, "Fprintln": true, "Msg": true, "Msgf": true,
}

// calleeName is the name of the function call calls, or "".
func calleeName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.SelectorExpr:
		return f.Sel.Name
	case *ast.Ident:
		return f.Name
	}
	return ""
}

// TestTheTestsSQLFigures counts, in every _test.go file of the module and
// in the test kit's own code (internal/testkit), the calls that pass SQL
// text written in place and the positional reads (.Scan with destinations,
// pgx.RowTo…ByPos, pgx.ForEachRow), logs them by directory (go test -v -run
// TestTheTestsSQLFigures ./internal/testkit/ is the measure
// docs/development.md quotes), and holds them to their ceilings.
func TestTheTestsSQLFigures(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	inline, positional := map[string]int{}, map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if rel == "bench" || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		inKit := strings.HasPrefix(rel, filepath.Join("internal", "testkit")+string(filepath.Separator))
		if !strings.HasSuffix(path, ".go") || !(strings.HasSuffix(path, "_test.go") || inKit) || strings.HasSuffix(path, ".gen.go") {
			return nil
		}
		if rel == filepath.Join("internal", "testkit", "testsql_test.go") {
			return nil // this file's own patterns
		}
		n, p := countFile(t, path)
		dir := filepath.Dir(rel)
		inline[dir] += n
		positional[dir] += p
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	totalInline, totalPositional := report(t, "inline SQL calls", inline), report(t, "positional reads", positional)
	check(t, "calls passing SQL written in place", totalInline, maxInlineSQL, "maxInlineSQL")
	check(t, "positional reads", totalPositional, maxPositionalReads, "maxPositionalReads")
}

// countFile returns the calls in path passing SQL text written in place,
// and its positional reads.
func countFile(t *testing.T, path string) (inline, positional int) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			name := sel.Sel.Name
			if (name == "Scan" && len(call.Args) > 0) || name == "ForEachRow" || (strings.HasPrefix(name, "RowTo") && strings.Contains(name, "ByPos")) {
				positional++
			}
		}
		if messageFuncs[calleeName(call)] {
			return true
		}
		for _, arg := range call.Args {
			if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && isSQL(s) {
					inline++
					break
				}
			}
		}
		return true
	})
	return inline, positional
}

// report logs the figure by directory, largest first, and returns its total.
func report(t *testing.T, what string, byDir map[string]int) int {
	t.Helper()
	dirs := make([]string, 0, len(byDir))
	total := 0
	for d, n := range byDir {
		if n > 0 {
			dirs = append(dirs, d)
		}
		total += n
	}
	sort.Slice(dirs, func(i, j int) bool {
		return byDir[dirs[i]] > byDir[dirs[j]] || byDir[dirs[i]] == byDir[dirs[j]] && dirs[i] < dirs[j]
	})
	var b strings.Builder
	for _, d := range dirs {
		b.WriteString("\n  " + strconv.Itoa(byDir[d]) + " " + d)
	}
	t.Logf("%s: %d%s", what, total, b.String())
	return total
}

// check fails a figure over its ceiling and asks for a lower ceiling when
// the figure went down.
func check(t *testing.T, what string, n, ceiling int, constant string) {
	t.Helper()
	switch {
	case n > ceiling:
		t.Errorf("%d %s in the tests, over the %d allowed (%s): use a typed statement or a fixture (internal/testkit/fixture) instead", n, what, ceiling, constant)
	case n < ceiling:
		t.Logf("%d %s, under the ceiling of %d: lower %s to %d", n, what, ceiling, constant, n)
	}
}

// TestWhatCountsAsSQL holds the counter's idea of SQL text to examples of
// what the tests pass: statements in either case, and the selectors,
// descriptions and arguments that begin with a statement's word.
func TestWhatCountsAsSQL(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"SELECT count(*) FROM engagement_message_queue": true,
		"COMMIT":                           true,
		"-- a comment\nUPDATE t SET a = 1": true,
		"select count(*) from t":           true,
		"insert into t values ($1)":        true,
		"table.audit tbody tr:first-child": false,
		"set":                              false,
		"update-p50-ms":                    false,
		"lock message %s":                  false,
		"set the %s budget":                false,
		"vacuum the queue":                 false,
		"create (after dropping) the migrated database `NAME` and print its URL": false,
	} {
		if got := isSQL(s); got != want {
			t.Errorf("isSQL(%q) = %v, want %v", s, got, want)
		}
	}
}
