package statemachine

import (
	"errors"
	"fmt"
)

// ErrInvalidTransition is wrapped by every error reporting that a trigger
// does not apply to a state.
var ErrInvalidTransition = errors.New("invalid transition")

// ErrUnknownState is wrapped by the error ParseState returns for a string
// that names no state.
var ErrUnknownState = errors.New("unknown state")

// ErrUnknownTrigger is wrapped by the error ParseTrigger returns for a
// string that names no trigger.
var ErrUnknownTrigger = errors.New("unknown trigger")

// TransitionError reports a (state, trigger) pair absent from the
// transition table. It wraps ErrInvalidTransition.
type TransitionError struct {
	// From is the state the trigger was applied to.
	From State
	// Trigger is the trigger that does not apply.
	Trigger Trigger
}

// Error describes the invalid pair, naming an unknown state or trigger as
// such.
func (e *TransitionError) Error() string {
	switch {
	case !e.From.Valid():
		return fmt.Sprintf("%v: unknown state %q", ErrInvalidTransition, string(e.From))
	case !e.Trigger.Valid():
		return fmt.Sprintf("%v: unknown trigger %q", ErrInvalidTransition, string(e.Trigger))
	}
	return fmt.Sprintf("%v: trigger %q does not apply to state %q",
		ErrInvalidTransition, string(e.Trigger), string(e.From))
}

// Unwrap returns ErrInvalidTransition.
func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }
