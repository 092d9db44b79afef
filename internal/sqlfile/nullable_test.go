package sqlfile_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// A result column is NOT NULL only when the server's description and plan
// prove it (issue 60): through a LEFT JOIN, a column its table declares NOT
// NULL comes out a pointer on the joined side and a value on the side
// every row keeps; so does what an anti join reads, and an aggregate or a
// scalar subquery unless the rules prove it.
func TestNullableUnlessProven(t *testing.T) {
	t.Parallel()
	conn := pgtest.NewTx(t).Conn()
	statement := `
WITH c AS (SELECT user_id, locale FROM user_profiles)
SELECT s.state, s.user_id::text AS kept_id, s.goodbye_sent_at,
       p.locale, p.user_id::text AS joined_id,
       coalesce(p.reengagement_opt_out, false) AS opted_out, p.user_id IS NOT NULL AS has_profile,
       c.locale AS cte_locale,
       (SELECT count(*) FROM engagement_message_queue q WHERE q.user_id = s.user_id) AS messages,
       (SELECT max(q.created_at) FROM engagement_message_queue q WHERE q.user_id = s.user_id) AS last_message,
       (SELECT count(*) FROM engagement_message_queue q WHERE q.user_id = s.user_id HAVING count(*) > 1) AS repeats,
       (SELECT q.status FROM engagement_message_queue q WHERE q.user_id = s.user_id LIMIT 1) AS a_status,
       CASE WHEN s.state = 'active' THEN 1 ELSE 0 END AS active,
       CASE WHEN s.state = 'active' THEN 1 END AS only_active
  FROM user_engagement_states s
  LEFT JOIN user_profiles p ON p.user_id = s.user_id
  LEFT JOIN c ON c.user_id = s.user_id
 WHERE s.user_id = @user_id::uuid`
	want := map[string]string{
		"state":           "string",     // the kept side's NOT NULL column
		"kept_id":         "string",     // a cast of it
		"goodbye_sent_at": "*time.Time", // a column its table leaves NULL-able
		"locale":          "*string",    // the joined side's NOT NULL column
		"joined_id":       "*string",    // a cast of it
		"opted_out":       "bool",       // COALESCE with a literal
		"has_profile":     "bool",       // IS NOT NULL
		"cte_locale":      "*string",    // a CTE read on the joined side
		"messages":        "int64",      // count, in a scalar subquery that is one aggregate
		"last_message":    "*time.Time", // max of no rows is NULL
		"a_status":        "*string",    // a scalar subquery may find no row
		"active":          "int",        // a CASE whose every branch is proven
		"only_active":     "*int",       // a CASE without ELSE
	}
	anti := `
SELECT s.state, p.locale
  FROM user_engagement_states s
  LEFT JOIN user_profiles p ON p.user_id = s.user_id
 WHERE p.user_id IS NULL`
	union := "SELECT s.state AS zone FROM user_engagement_states s UNION ALL SELECT p.timezone FROM user_profiles p"
	files := fstest.MapFS{
		"queries/joined.sql": {Data: []byte(statement)},
		"queries/anti.sql":   {Data: []byte(anti)},
		"queries/union.sql":  {Data: []byte(union)},
	}
	src, err := sqlfile.Generate(context.Background(), conn, "demo", files)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+\w+\s+(\S+)\s+// (\w+)$`).FindAllStringSubmatch(string(src), -1) {
		got[m[2]] = m[1]
	}
	for col, typ := range want {
		if got[col] != typ {
			t.Errorf("column %s: %s, want %s", col, got[col], typ)
		}
	}
	// A UNION's column is NULL-able when one of its arms is.
	if got["zone"] != "*string" {
		t.Errorf("union.sql: zone is %s, want *string", got["zone"])
	}
	// The anti join's locale is always NULL, though its table says NOT NULL.
	if !strings.Contains(string(src), "Locale *string // locale\n}\n\n// Dest returns the fields in the columns' order.\nfunc (r *antiRow)") {
		t.Errorf("anti.sql: locale is not a pointer:\n%s", src)
	}
}

// A directive the rules make redundant is refused, so the files keep only
// what the generator cannot see: "-- nullable:" on a column already
// NULL-able, "-- not null:" on one already proven.
func TestARedundantDirectiveIsRefused(t *testing.T) {
	t.Parallel()
	conn := pgtest.NewTx(t).Conn()
	for name, c := range map[string]struct{ sql, want string }{
		"nullable": {"-- nullable: locale\nSELECT p.locale FROM user_engagement_states s LEFT JOIN user_profiles p ON p.user_id = s.user_id",
			"nullable: locale is NULL-able without it"},
		"not null": {"-- not null: n\nSELECT count(*) AS n FROM user_profiles",
			"not null: n is proven NOT NULL without it"},
	} {
		_, err := sqlfile.Generate(context.Background(), conn, "demo", fstest.MapFS{"queries/q.sql": {Data: []byte(c.sql)}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}
