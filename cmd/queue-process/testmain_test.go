package main_test

import (
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// TestMain runs 4 tests at a time (they mostly wait on the binaries they
// start and on their receivers; go test -parallel says otherwise) and
// removes the binaries cmdtest.Build made once the tests end.
func TestMain(m *testing.M) {
	cmdtest.ParallelAtLeast(4)
	cmdtest.Main(m)
}
