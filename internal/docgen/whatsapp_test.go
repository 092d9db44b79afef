package docgen_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryMetaChangeNamesATestThatExists holds docs/whatsapp.md's "What
// Meta changed, and when" to the suite: each test a row names is defined
// in the package the row says, so a renamed or deleted test cannot leave
// a change of Meta's looking held when nothing holds it.
func TestEveryMetaChangeNamesATestThatExists(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "whatsapp.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "## What Meta changed, and when")
	if !ok {
		t.Fatal(`docs/whatsapp.md has no "What Meta changed, and when"`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	cell := regexp.MustCompile("`([a-z][a-z0-9/-]*)` ")
	name := regexp.MustCompile("`(Test[A-Za-z0-9_]+)`")
	var named int
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(row, " | ")
		if !strings.HasPrefix(row, "| ") || len(cells) < 2 {
			continue
		}
		last := cells[len(cells)-1]
		pkg := ""
		for _, part := range strings.Split(last, ",") {
			if m := cell.FindStringSubmatch(part); m != nil {
				pkg = m[1]
			}
			for _, m := range name.FindAllStringSubmatch(part, -1) {
				if pkg == "" {
					t.Errorf("docs/whatsapp.md names %s without its package", m[1])
					continue
				}
				named++
				if !definesTest(t, filepath.Join("..", "..", pkg), m[1]) {
					t.Errorf("docs/whatsapp.md: %s names %s, which %s does not define", firstCell(row), m[1], pkg)
				}
			}
		}
	}
	if named < 10 {
		t.Errorf("docs/whatsapp.md's table names %d tests; expected one or more per change", named)
	}
}

func firstCell(row string) string {
	c, _, _ := strings.Cut(strings.TrimPrefix(row, "| "), " | ")
	return c
}

// definesTest reports whether a _test.go file in dir declares func name.
func definesTest(t *testing.T, dir, name string) bool {
	t.Helper()
	files := os.DirFS(dir)
	tests, err := fs.Glob(files, "*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tests {
		b, err := fs.ReadFile(files, f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "func "+name+"(") {
			return true
		}
	}
	return false
}
