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

// TestOneQuerier keeps one Querier interface in the module: this
// package's. A second one (delivery/budget.go had one, with only Query)
// lets a function accept less than a pool, connection or transaction
// offers and drifts from the first; the public packages name this one by
// an alias (type Querier = postgres.Querier).
func TestOneQuerier(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var aliases int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "bench":
				if rel != "." {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || rel == filepath.Join("internal", "postgres", "postgres.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok || !strings.HasSuffix(spec.Name.Name, "Querier") {
				return true
			}
			if spec.Assign.IsValid() {
				aliases++
				return true
			}
			if _, ok := spec.Type.(*ast.InterfaceType); ok {
				t.Errorf("%s:%d: %s is a second Querier interface: use postgres.Querier (or an alias of it)",
					rel, fset.Position(spec.Pos()).Line, spec.Name.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if aliases == 0 {
		t.Fatal("found no alias of postgres.Querier at all: the walk no longer reaches the module's files")
	}
}
