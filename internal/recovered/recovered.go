// Package recovered turns a panic in one of the binaries' goroutines into
// an error that ends the run the normal way: the workers stop, claims are
// handed back, the summary is written, and the process exits 1 with the
// panic's stack in the log. Left alone, a panic in a goroutine other than
// main's kills the process with Go's exit code 2, which the contract (and
// the shipped Kubernetes podFailurePolicy) reads as a configuration error
// that retrying cannot fix.
package recovered

import (
	"fmt"
	"runtime/debug"
)

// Error is a recovered panic: its value and the stack of the goroutine
// that panicked.
type Error struct {
	Value any
	Stack []byte
}

func (e *Error) Error() string { return fmt.Sprintf("internal error: panic: %v", e.Value) }

// Func returns f guarded: a panic in f is returned as an *Error. Use it for
// errgroup goroutines: g.Go(recovered.Func(work)).
func Func(f func() error) func() error {
	return func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = &Error{Value: r, Stack: debug.Stack()}
			}
		}()
		return f()
	}
}

// Call runs f and returns its panic, if any, as an *Error.
func Call(f func()) error {
	return Func(func() error { f(); return nil })()
}
