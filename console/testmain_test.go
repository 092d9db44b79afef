package console_test

import (
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// TestMain runs the browser tests in one shared browser, a browser
// context (an incognito profile) each, and stops it and removes the
// binaries cmdtest.Build made once the tests end.
func TestMain(m *testing.M) { cmdtest.Main(m, browsertest.Share()) }
