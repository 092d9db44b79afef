package sqlfile_test

import (
	"bytes"
	"context"
	"flag"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

var write = flag.Bool("write", false, "rewrite each package's "+sqlfile.GeneratedFile+" (make sql)")

// Each package's queries.gen.go is what make sql makes of its queries/
// today, on a freshly migrated database: a statement edited without
// regenerating fails here, and `make sql` (go test -run this -args -write)
// brings the typed code up to date.
func TestStatementsAreGenerated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := pgtest.NewTx(t).Conn()

	dirs := statementDirs(t)
	if len(dirs) < 10 {
		t.Fatalf("found %d packages with a queries/ folder: the walk is broken", len(dirs))
	}
	for _, dir := range dirs {
		rel, _ := filepath.Rel(moduleRoot, dir)
		got, err := sqlfile.Generate(ctx, conn, packageName(t, dir), os.DirFS(dir))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		file := filepath.Join(dir, sqlfile.GeneratedFile)
		if *write {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s/%s is not what its queries/ make of it (%v): run make sql", rel, sqlfile.GeneratedFile, err)
		}
	}
}

// statementDirs lists the module's packages with a queries/ folder.
func statementDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(moduleRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || p == moduleRoot {
			return nil
		}
		if d.Name() == "testdata" || d.Name() == "bench" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.Name() == sqlfile.Dir {
			dirs = append(dirs, filepath.Dir(p))
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// packageName reads the package clause of dir's first non-test Go file.
func packageName(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		return file.Name.Name
	}
	t.Fatalf("%s: no Go package", dir)
	return ""
}

// Load numbers a file's parameters as pgx does and holds them to the
// generated declaration's: a file edited since make sql (a parameter
// added, here @limit) panics, naming both lists, instead of binding a
// value to the wrong parameter.
func TestLoadRefusesAFileEditedSinceMakeSQL(t *testing.T) {
	t.Parallel()
	files := fstest.MapFS{"queries/count.sql": {Data: []byte("-- @not_this\nSELECT count(*) AS n FROM t WHERE a = @a AND b = @limit AND c = @a")}}
	st := sqlfile.Load[sqlfile.None, sqlfile.None, *sqlfile.None](files, "count", "a", "limit")
	if want := "SELECT count(*) AS n FROM t WHERE a = $1 AND b = $2 AND c = $1"; !strings.HasSuffix(st.SQL, want) {
		t.Errorf("loaded %q, want it to end %q", st.SQL, want)
	}
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "takes @a, @limit, its generated code @a: run make sql") {
			t.Errorf("a stale declaration: panic %q, want one naming both lists", msg)
		}
	}()
	sqlfile.Load[sqlfile.None, sqlfile.None, *sqlfile.None](files, "count", "a")
}
