package cmdtest

import (
	"fmt"
	"testing"
)

// recorder is a testing.TB that records Errorf instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// Issue 24, point 2: the test kit fails a test whose command logged a
// PostgreSQL WARNING, in JSON or console format, and nothing else.
func TestNoServerWarningsFlagsEachWarningLine(t *testing.T) {
	r := &recorder{TB: t}
	NoServerWarnings(r, "engagement-daily", `{"level":"info","message":"job started"}
{"level":"warn","sqlstate":"25P01","notice":"SET LOCAL can only be used in transaction blocks","message":"postgres warning"}
12:00:00 WRN postgres warning notice="SET LOCAL can only be used in transaction blocks" sqlstate=25P01
{"level":"warn","message":"a batch lost its database connection; retrying it on a new one"}`)
	if len(r.errors) != 2 {
		t.Errorf("%d lines flagged, want the 2 warning lines: %q", len(r.errors), r.errors)
	}
	r = &recorder{TB: t}
	NoServerWarnings(r, "engagement-daily", `{"level":"info","message":"job finished"}`)
	if len(r.errors) != 0 {
		t.Errorf("a clean log flagged: %q", r.errors)
	}
}
