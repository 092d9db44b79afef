package postgres_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// notTheBinariesPool is the comment that lets a pool be opened other than
// through postgres.Open or PoolConfig: on the line of the call, saying
// whose pool it is.
const notTheBinariesPool = "not the binaries' pool:"

// TestEveryPoolIsTheBinariesUnlessSaid keeps the tests honest about the
// pool: a test that opens its own with pgxpool's defaults runs statements
// in another mode than the binaries (prepared and described, where the
// binaries send unnamed statements typed from Go values), and once hid a
// 500 on every console action. Every pgxpool.New or NewWithConfig in the
// module outside this package is either gone through PoolConfig or says,
// on its line, whose pool it is (a fixture's, the bot's, a seeder's).
func TestEveryPoolIsTheBinariesUnlessSaid(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "bench": // bench is a module of its own
				if rel != "." {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || rel == filepath.Join("internal", "postgres", "postgres.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		said := map[int]bool{}
		for _, g := range f.Comments {
			for _, c := range g.List {
				if strings.Contains(c.Text, notTheBinariesPool) {
					said[fset.Position(c.Pos()).Line] = true
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "New" && sel.Sel.Name != "NewWithConfig") {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "pgxpool" {
				return true
			}
			found++
			if pos := fset.Position(call.Pos()); !said[pos.Line] {
				t.Errorf("%s:%d: pgxpool.%s opens a pool the binaries do not: use postgres.Open or postgres.PoolConfig, or say on the line %q whose pool it is",
					rel, pos.Line, sel.Sel.Name, "// "+notTheBinariesPool+" …")
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("found no pgxpool call at all: the walk no longer reaches the module's files")
	}
}
