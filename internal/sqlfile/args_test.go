package sqlfile_test

import (
	"context"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// A name the statement uses that the caller does not pass fails, where
// pgx.NamedArgs would bind NULL: the planted typo (@as_ofx) is caught.
// Names the statement does not use are allowed, and quoted text, quoted
// identifiers and comments are not read as names.
func TestArgsRefuseAParameterTheCallerDoesNotPass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const sql = `-- @not_a_parameter
SELECT @as_of::timestamptz, '@s.whatsapp.net', "@col", @limit::int /* @nor_this */, @as_of::timestamptz`
	args := sqlfile.Args{"as_of": "2026-11-25T00:00:00Z", "limit": 3, "unused": true}
	got, bound, err := args.RewriteQuery(ctx, nil, sql, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "$1::timestamptz") || !strings.Contains(got, "$2::int") || len(bound) != 2 {
		t.Errorf("rewrote to %q with %d arguments, want @as_of as $1 (twice) and @limit as $2", got, len(bound))
	}
	typo := strings.Replace(sql, "@limit", "@limt", 1)
	if _, _, err := args.RewriteQuery(ctx, nil, typo, nil); err == nil || !strings.Contains(err.Error(), "@limt") {
		t.Errorf("a statement using @limt, which is not passed: err %v, want one naming @limt", err)
	}
}
