package console_test

import (
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// TestMain removes the binaries cmdtest.Build made once the tests end.
func TestMain(m *testing.M) { cmdtest.Main(m) }
