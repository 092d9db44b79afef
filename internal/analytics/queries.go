package analytics

import (
	"embed"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// The package's statements, one per file in queries/ (internal/sqlfile's
// test plans each against a migrated database).
//
//go:embed queries/*.sql
var queryFiles embed.FS

var (
	runSQL            = sqlfile.Must(queryFiles, "run")
	runTransitionsSQL = sqlfile.Must(queryFiles, "run_transitions")
	runMessagesSQL    = sqlfile.Must(queryFiles, "run_messages")
)
