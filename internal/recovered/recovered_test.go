package recovered_test

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/engagement-scheduler/engagement/internal/recovered"
)

func TestAPanicInAGoroutineIsAnErrorWithItsStack(t *testing.T) {
	t.Parallel()
	var g errgroup.Group
	g.Go(recovered.Func(func() error { return nil }))
	g.Go(recovered.Func(func() error { panicInWorker(); return nil }))
	err := g.Wait()
	var pe *recovered.Error
	if !errors.As(err, &pe) || pe.Value != "boom" || !strings.Contains(string(pe.Stack), "panicInWorker") {
		t.Fatalf("Wait() = %v, want a *recovered.Error with the value and the worker's stack", err)
	}
	if err.Error() != "internal error: panic: boom" {
		t.Errorf("Error() = %q", err.Error())
	}
	if err := recovered.Call(func() {}); err != nil {
		t.Errorf("Call of a function that returns: %v", err)
	}
}

func panicInWorker() { panic("boom") }
