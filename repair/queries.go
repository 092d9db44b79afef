package repair

import (
	"embed"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// The package's statements, one complete statement per file, so a reader
// can paste any of them into psql. queries_test.go EXPLAINs each against a
// migrated database with realistic arguments (and internal/sqlfile's test
// every package's).
//
//go:embed queries/*.sql
var queryFiles embed.FS

// mustQuery is the statement in queries/<name>.sql.
func mustQuery(name string) string { return sqlfile.Must(queryFiles, name) }
