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
	maxInlineSQL       = 184
	maxPositionalReads = 46
)

// sqlStart is how SQL text begins: a statement's first word.
var sqlStart = regexp.MustCompile(`(?i)^\s*(--[^\n]*\n\s*)*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP|TRUNCATE|VACUUM|ANALYZE|SET|RESET|BEGIN|COMMIT|ROLLBACK|LOCK|DO|CALL|GRANT|REVOKE|COPY|NOTIFY|LISTEN|CHECKPOINT|REFRESH|COMMENT|EXPLAIN|TABLE|VALUES)\b`)

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
		for _, arg := range call.Args {
			if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && sqlStart.MatchString(s) {
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
