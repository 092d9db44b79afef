package metafake

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// Env is queue-process's environment for the Cloud API number of g on the
// database at dbURL: the weekly review's key mapped to its template
// weekly_review_v1 (pt_BR, body parameter count), declared of category in
// the templates file unless category is "" (then its kind's, marketing).
func (g *Graph) Env(t testing.TB, dbURL, category string) []string {
	t.Helper()
	declared := ""
	if category != "" {
		declared = `,"category":"` + category + `"`
	}
	templates := filepath.Join(t.TempDir(), "templates.json")
	if err := os.WriteFile(templates, []byte(`{"engagement.weekly_review.celebration":
		{"name":"weekly_review_v1","language":{"pt-BR":"pt_BR"},"params":["count"]`+declared+`}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return cmdtest.Env(g.CloudEnv(dbURL, templates)...)
}
