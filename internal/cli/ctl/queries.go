package ctl

import "embed"

// The package's statements, one per file in queries/ (internal/sqlfile's
// test plans each against a migrated database).
//
//go:embed queries/*.sql
var queryFiles embed.FS
