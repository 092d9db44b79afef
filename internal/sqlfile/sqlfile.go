// Package sqlfile runs the SQL statements a package keeps next to its code:
// one complete statement per file in its queries/ folder, with named
// parameters (@as_of), which a reader can paste into psql. make sql
// (Generate) turns each into a typed Statement in the package's
// queries.gen.go, its parameters and its columns struct fields;
// sqlfile_test.go plans every file of every package against a migrated
// database and holds each queries.gen.go to its files, so a statement that
// drifts from the schema or from its Go fails CI.
package sqlfile

import (
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Dir is the folder, inside a package, that holds its statements.
const Dir = "queries"

// Must returns the statement in queries/<name>.sql of fsys (a package's
// embedded files). A missing file is a programming error that every test
// of the package would hit, so it panics.
func Must(fsys fs.FS, name string) string {
	b, err := fs.ReadFile(fsys, path.Join(Dir, name+".sql"))
	if err != nil {
		panic("sqlfile: missing embedded statement " + name + ": " + err.Error())
	}
	return string(b)
}

// Names lists the statements of fsys's queries/ folder, sorted, without
// the .sql extension.
func Names(fsys fs.FS) []string {
	files, err := fs.Glob(fsys, path.Join(Dir, "*.sql"))
	if err != nil {
		panic("sqlfile: " + err.Error()) // only a malformed pattern fails
	}
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, strings.TrimSuffix(path.Base(f), ".sql"))
	}
	slices.Sort(names)
	return names
}
