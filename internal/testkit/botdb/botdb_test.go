package botdb_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/botdb"
)

// TestSchemaIsTheSharedOne keeps testdata/bot-schema.sql in step with the
// design's ../shared/bot-schema.sql, where a checkout has it beside (CI
// does): the tests must run on the bot's database as it is.
func TestSchemaIsTheSharedOne(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "..", "shared", "bot-schema.sql")
	want, err := os.ReadFile(shared)
	if os.IsNotExist(err) {
		t.Skipf("%s is not beside this checkout", shared)
	}
	if err != nil {
		t.Fatal(err)
	}
	if botdb.Schema != string(want) {
		t.Errorf("internal/testkit/botdb/testdata/bot-schema.sql differs from %s: copy it over (cp %s internal/testkit/botdb/testdata/)", shared, shared)
	}
}
