package statemachine

import "fmt"

// State is the engagement state of a user, as stored in the database.
type State string

// The engagement states.
const (
	// Active is a user who interacts with the bot.
	Active State = "active"
	// GoodbyeSent is a user who was inactive and has been sent a goodbye.
	GoodbyeSent State = "goodbye_sent"
	// HelpFlow is a user who answered the goodbye asking for help.
	HelpFlow State = "help_flow"
	// RemindLater is a user who asked to be reminded later.
	RemindLater State = "remind_later"
	// Dormant is a user the bot no longer reaches out to.
	Dormant State = "dormant"
)

// States returns all engagement states in a fixed order: active,
// goodbye_sent, help_flow, remind_later, dormant. The slice is a fresh copy.
func States() []State {
	return []State{Active, GoodbyeSent, HelpFlow, RemindLater, Dormant}
}

// ParseState returns the State named by s, or an error wrapping
// ErrUnknownState that names s if it is not a known state.
func ParseState(s string) (State, error) {
	if st := State(s); st.Valid() {
		return st, nil
	}
	return "", fmt.Errorf("%w %q", ErrUnknownState, s)
}

// Valid reports whether s is one of the known engagement states.
func (s State) Valid() bool {
	switch s {
	case Active, GoodbyeSent, HelpFlow, RemindLater, Dormant:
		return true
	}
	return false
}

// String returns the stored form of s, e.g. "goodbye_sent".
func (s State) String() string { return string(s) }
