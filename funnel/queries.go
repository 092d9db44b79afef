package funnel

import (
	"embed"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// The package's statements, one complete statement per file in queries/,
// each a reader can paste into psql. internal/sqlfile's test plans every
// one against a migrated database.
//
//go:embed queries/*.sql
var queryFiles embed.FS

// query is the statement in queries/<name>.sql.
func query(name string) string { return sqlfile.Must(queryFiles, name) }
