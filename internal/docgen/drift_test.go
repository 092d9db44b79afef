package docgen_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// goFiles parses every Go file of the module (not the benchmarks', a
// module of their own) and calls fn with each and its path from the root.
func goFiles(t *testing.T, fn func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var n int
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
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		n++
		fn(filepath.ToSlash(rel), fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("parsed %d Go files: the walk no longer reaches the module's", n)
	}
}

var (
	// panicPrefix is the "pkg: " a panic's message starts with.
	panicPrefix = regexp.MustCompile(`^([a-z][a-z0-9]*): `)
	// camelWord is a first word of a doc comment that can only be an
	// identifier (an inner capital: errBadRequest, newThing).
	camelWord = regexp.MustCompile(`^[a-z]+[A-Z][A-Za-z0-9]*$`)
)

// TestCommentsAndPanicsNameWhatTheySitOn holds two kinds of text to the
// code they sit in, which renames left stale before (issue 47): a panic
// whose message starts "pkg: " names its own package (a "sender:" panic
// sat in delivery), and a doc comment that starts with an identifier
// names the declaration under it (errBadRequest's comment sat on
// badRequest).
func TestCommentsAndPanicsNameWhatTheySitOn(t *testing.T) {
	goFiles(t, func(rel string, fset *token.FileSet, f *ast.File) {
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				id, ok := n.Fun.(*ast.Ident)
				if !ok || id.Name != "panic" || len(n.Args) != 1 {
					return true
				}
				arg := n.Args[0]
				if bin, ok := arg.(*ast.BinaryExpr); ok {
					for {
						left, ok := bin.X.(*ast.BinaryExpr)
						if !ok {
							break
						}
						bin = left
					}
					arg = bin.X
				}
				lit, ok := arg.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				if m := panicPrefix.FindStringSubmatch(s); m != nil && m[1] != pkg {
					t.Errorf("%s:%d: panic(%q…) in package %s: start it %q", rel, fset.Position(n.Pos()).Line, m[0], pkg, pkg+": ")
				}
			case *ast.GenDecl:
				for _, spec := range n.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					doc := ts.Doc
					if doc == nil && len(n.Specs) == 1 {
						doc = n.Doc
					}
					checkDoc(t, rel, fset, doc, ts.Name.Name)
				}
			case *ast.FuncDecl:
				checkDoc(t, rel, fset, n.Doc, n.Name.Name)
			}
			return true
		})
	})
}

// checkDoc fails when doc starts with an identifier other than name.
func checkDoc(t *testing.T, rel string, fset *token.FileSet, doc *ast.CommentGroup, name string) {
	t.Helper()
	if doc == nil {
		return
	}
	fields := strings.Fields(doc.Text())
	if len(fields) == 0 {
		return
	}
	first := strings.TrimRight(fields[0], ",.:;")
	if first != name && camelWord.MatchString(first) {
		t.Errorf("%s:%d: the comment on %s starts with %s: a rename left it stale?", rel, fset.Position(doc.Pos()).Line, name, first)
	}
}

// TestOneQuerier keeps one Querier interface in the module:
// internal/postgres'. A second one (delivery/budget.go had one, with only
// Query) lets a function accept less than a pool, connection or
// transaction offers and drifts from the first; the public packages name
// it by an alias (type Querier = postgres.Querier).
func TestOneQuerier(t *testing.T) {
	var aliases int
	goFiles(t, func(rel string, fset *token.FileSet, f *ast.File) {
		if rel == "internal/postgres/postgres.go" {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok || !strings.HasSuffix(spec.Name.Name, "Querier") {
				return true
			}
			if spec.Assign.IsValid() {
				aliases++
			} else if _, ok := spec.Type.(*ast.InterfaceType); ok {
				t.Errorf("%s:%d: %s is a second Querier interface: use postgres.Querier (or an alias of it)",
					rel, fset.Position(spec.Pos()).Line, spec.Name.Name)
			}
			return true
		})
	})
	if aliases == 0 {
		t.Fatal("found no alias of postgres.Querier at all: the walk no longer reaches the module's files")
	}
}
