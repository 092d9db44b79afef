package console_test

import (
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// TestMain runs 4 tests at a time (they mostly wait on the browser, the
// snapshots and the binaries; go test -parallel says otherwise), the
// browser tests in one shared browser, a browser context (an incognito
// profile) each, and stops it and removes the binaries cmdtest.Build made
// once the tests end.
func TestMain(m *testing.M) {
	cmdtest.ParallelAtLeast(4)
	cmdtest.Main(m, browsertest.Share())
}
