package console

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function of console/ or delivery/ may be,
// its signature and closing brace included (issue 60).
const maxFuncLines = 60

// Issue 60: no function of console/ or delivery/ (their code, not their
// tests or generated files) is over maxFuncLines lines. The measure is
// docs/development.md's: go test -run TestNoLongFunctions -v ./console/
// names every one over the limit.
func TestNoLongFunctions(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", "../delivery"} {
		for name, n := range longFunctions(t, dir) {
			t.Errorf("%s is %d lines, over %d: split it", name, n, maxFuncLines)
		}
	}
}

// maxLongElsewhere is how many functions of the rest of the product (not
// console/ or delivery/, whose limit is none; not tests, the test kit,
// generated files, the benchmark tool or the examples) may be over
// maxFuncLines (issue 60).
const maxLongElsewhere = 5

// Issue 60: elsewhere in the product, at most maxLongElsewhere functions
// are over maxFuncLines lines (21 at 7e501d16, 0 since).
func TestFewLongFunctionsElsewhere(t *testing.T) {
	t.Parallel()
	long := map[string]int{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		switch filepath.ToSlash(path) {
		case "../bench", "../examples", "../internal/testkit", "../.git", "../console", "../delivery":
			return filepath.SkipDir
		}
		maps.Copy(long, longFunctions(t, path))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(long) > maxLongElsewhere {
		t.Errorf("%d functions of the product are over %d lines, more than the %d allowed: split them: %v",
			len(long), maxFuncLines, maxLongElsewhere, long)
	}
}

// longFunctions returns the functions of dir's code over maxFuncLines,
// as "file name" (file relative to the console), by length.
func longFunctions(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, f := range slices.Sorted(slices.Values(files)) {
		if strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, ".gen.go") {
			continue
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				out[fmt.Sprintf("%s %s", filepath.ToSlash(f), fn.Name.Name)] = n
			}
		}
	}
	return out
}
