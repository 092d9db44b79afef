package drift_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// vocabulary is, for each column whose values the Go code declares, the
// values a statement may compare it with or write into it.
func vocabulary() map[string][]string {
	states := make([]string, 0, len(sm.States()))
	for _, s := range sm.States() {
		states = append(states, string(s))
	}
	// "status" is the column of several tables: a message's, a job run's
	// (scheduler.Run*), a processed message's (a message status) and a
	// receipt's (activity.Receipt*), a template's (Meta's). Their CHECK constraints are held to
	// their own lists by TestCheckConstraintsMatchTheDeclaredValues.
	status := slices.Concat(sm.MessageStatuses(),
		[]string{scheduler.RunRunning, scheduler.RunDelivering, scheduler.RunSucceeded, scheduler.RunPartial,
			scheduler.RunFailed, scheduler.RunStopped, scheduler.RunAbandoned},
		[]string{activity.ReceiptSent, activity.ReceiptDelivered, activity.ReceiptRead, activity.ReceiptFailed},
		// Meta's template statuses (engagement_template_status.status),
		// stored as Meta's webhook spells them: PAUSED and DISABLED hold a
		// template, APPROVED and REINSTATED release it
		// (console/queries/whatsapp_template_status.sql); no Go constant
		// names them yet.
		[]string{"PAUSED", "DISABLED", "APPROVED", "REINSTATED"})
	return map[string][]string{
		"status":          status,
		"cancel_reason":   sm.CancelReasons(),
		"deferred_reason": sm.DeferredReasons(),
		// '' is "not skipped"; 'queued_before' is weekly_review.sql's own
		// mark for a user an earlier run of the week reviewed, counted as
		// reviewed and never reported as a skip.
		"skip_reason": slices.Concat(sm.SkipReasons(), []string{"", "queued_before"}),
		"state":       states,
	}
}

var (
	sqlComment = regexp.MustCompile(`--[^\n]*`)
	literal    = regexp.MustCompile(`'([^']*)'`)
	caseOrEnd  = regexp.MustCompile(`(?i)\b(case|end)\b`)
	thenOrElse = regexp.MustCompile(`(?i)\b(?:then|else)\s+'([^']*)'`)
)

// usesOf finds the literals a statement compares column with or writes
// into it: col = 'x' (and <>, IS [NOT] DISTINCT FROM, either way round),
// col [NOT] IN ('x', …), col = ANY (ARRAY['x', …]), 'x' AS col, and the
// THEN and ELSE literals of CASE … END AS col and col = CASE … END. It
// returns each with its byte offset.
func usesOf(sql, col string) (uses []struct {
	value string
	at    int
}) {
	add := func(v string, at int) {
		uses = append(uses, struct {
			value string
			at    int
		}{v, at})
	}
	c := `(?:\b\w+\.)?\b` + col + `\b`
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)` + c + `\s*(?:=|<>|!=|\bis\s+(?:not\s+)?distinct\s+from)\s*'([^']*)'`),
		regexp.MustCompile(`(?i)'([^']*)'\s*(?:=|<>|!=)\s*` + c),
		regexp.MustCompile(`(?i)'([^']*)'(?:::text)?\s+as\s+` + col + `\b`),
	} {
		for _, m := range re.FindAllStringSubmatchIndex(sql, -1) {
			add(sql[m[2]:m[3]], m[0])
		}
	}
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)` + c + `\s+(?:not\s+)?in\s*\(([^)]*)\)`),
		regexp.MustCompile(`(?i)` + c + `\s*(?:=|<>)\s*(?:any|all)\s*\(\s*array\s*\[([^\]]*)\]`),
	} {
		for _, m := range re.FindAllStringSubmatchIndex(sql, -1) {
			for _, l := range literal.FindAllStringSubmatch(sql[m[2]:m[3]], -1) {
				add(l[1], m[0])
			}
		}
	}
	// CASE … END AS col: back from the END to its CASE.
	for _, m := range regexp.MustCompile(`(?i)\bend\s+as\s+`+col+`\b`).FindAllStringIndex(sql, -1) {
		tokens := caseOrEnd.FindAllStringIndex(sql[:m[0]], -1)
		depth := 0
		for i := len(tokens) - 1; i >= 0; i-- {
			if strings.EqualFold(sql[tokens[i][0]:tokens[i][1]], "end") {
				depth++
				continue
			}
			if depth > 0 {
				depth--
				continue
			}
			for _, l := range thenOrElse.FindAllStringSubmatch(sql[tokens[i][0]:m[0]], -1) {
				add(l[1], m[0])
			}
			break
		}
	}
	// col = CASE … END: on from the CASE to its END.
	for _, m := range regexp.MustCompile(`(?i)`+c+`\s*=\s*case\b`).FindAllStringIndex(sql, -1) {
		tokens := caseOrEnd.FindAllStringIndex(sql[m[1]:], -1)
		depth := 0
		for _, tok := range tokens {
			if strings.EqualFold(sql[m[1]+tok[0]:m[1]+tok[1]], "case") {
				depth++
				continue
			}
			if depth > 0 {
				depth--
				continue
			}
			for _, l := range thenOrElse.FindAllStringSubmatch(sql[m[0]:m[1]+tok[0]], -1) {
				add(l[1], m[0])
			}
			break
		}
	}
	return uses
}

// sqlFiles lists every .sql file of the repository (the benchmark module's
// included), relative to its root.
func sqlFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".sql") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestSQLUsesOnlyDeclaredValues reads every SQL file in the tree (the
// statements, the migrations with their CHECK constraints, the generated
// schema, the test kit's and the benchmarks') and fails on a status,
// cancel, deferred or skip reason, or state the Go code does not declare
// (statemachine's lists): a typo such as 'canceled' would otherwise match
// no row, silently.
func TestSQLUsesOnlyDeclaredValues(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	files := sqlFiles(t, root)
	if len(files) < 100 {
		t.Fatalf("found %d SQL files under %s; the walk is broken", len(files), root)
	}
	vocab := vocabulary()
	seen := map[string]int{}
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			t.Fatal(err)
		}
		// Comments out, keeping every offset (so line numbers hold).
		sql := sqlComment.ReplaceAllStringFunc(string(b), func(s string) string { return strings.Repeat(" ", len(s)) })
		for col, allowed := range vocab {
			for _, u := range usesOf(sql, col) {
				seen[col]++
				if !slices.Contains(allowed, u.value) {
					line := 1 + strings.Count(sql[:u.at], "\n")
					t.Errorf("%s:%d: %s '%s' is not declared in Go (declared: %s)",
						file, line, col, u.value, strings.Join(slices.Compact(sorted(allowed)), ", "))
				}
			}
		}
	}
	// The finder finds: each column is compared somewhere.
	for col := range vocab {
		if seen[col] == 0 {
			t.Errorf("no SQL file compares %s with a literal: the finder is broken", col)
		}
	}
	t.Logf("checked %d SQL files: %v uses by column", len(files), seen)
}

// TestCheckConstraintsMatchTheDeclaredValues reads the CHECK constraints
// of a freshly migrated database and holds each to the Go list it stands
// for, value for value: a value the Go code declares but the database
// refuses (or the reverse) fails here, not in production.
func TestCheckConstraintsMatchTheDeclaredValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	states := make([]string, 0, len(sm.States()))
	for _, s := range sm.States() {
		states = append(states, string(s))
	}
	for _, c := range []struct {
		table, column string
		want          []string
	}{
		{"engagement_message_queue", "status", sm.MessageStatuses()},
		{"engagement_message_queue", "cancel_reason", sm.CancelReasons()},
		{"engagement_message_queue", "deferred_reason", sm.DeferredReasons()},
		{"engagement_processed_messages", "status", []string{sm.StatusProcessing, sm.StatusSent, sm.StatusFailed}},
		{"engagement_job_runs", "status", []string{scheduler.RunRunning, scheduler.RunDelivering, scheduler.RunSucceeded,
			scheduler.RunPartial, scheduler.RunFailed, scheduler.RunStopped, scheduler.RunAbandoned}},
		{"user_engagement_states", "state", states},
	} {
		defs := fixture.CheckConstraints(t, conn, c.table, c.column)
		if len(defs) != 1 {
			t.Errorf("%s.%s: %d CHECK constraints (%q), want one listing its values", c.table, c.column, len(defs), defs)
			continue
		}
		var got []string
		for _, m := range literal.FindAllStringSubmatch(defs[0], -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(sorted(got), sorted(c.want)) {
			t.Errorf("%s.%s: the CHECK constraint allows %q, the Go code declares %q: add a migration (or fix the Go list)",
				c.table, c.column, got, c.want)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
