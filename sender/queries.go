package sender

import (
	"embed"
	"io/fs"
)

// The delivery engine's statements, one complete statement per file, so a
// reader can paste any of them into psql. queries_test.go EXPLAINs each
// against a migrated database.
//
//go:embed queries/*.sql
var queryFiles embed.FS

var (
	claimSQL   = mustQuery("claim")
	startSQL   = mustQuery("start")
	settleSQL  = mustQuery("settle")
	renewSQL   = mustQuery("renew")
	releaseSQL = mustQuery("release")
	recoverSQL = mustQuery("recover")
	paceSQL    = mustQuery("pace")
	nextDueSQL = mustQuery("next_due")
)

func mustQuery(name string) string {
	b, err := fs.ReadFile(queryFiles, "queries/"+name+".sql")
	if err != nil {
		panic("sender: missing embedded query " + name)
	}
	return string(b)
}
