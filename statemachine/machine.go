package statemachine

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Machine is the state machine's tables as a value: its triggers, its
// transitions (with each timer's clock and wait) and its kinds of message.
// The constructors of the jobs, the forecast and the reports take one
// (scheduler.Config.Machine, scheduler.ForecastDaily,
// status.Options.Machine, console.Config.Machine); the zero Machine,
// Default, is the tables this package declares (transition.go, kind.go),
// the ones the binaries run, and the package's functions (Timers, Kinds,
// Next, …) are Default's.
//
// With adds rows to a machine as docs/development.md's recipe ("Adding a
// message kind with its own time trigger") adds them to transition.go and
// kind.go, so that a test can carry the recipe out in process and read
// the new timer back from the product.
type Machine struct{ t *tables }

// Default is the shipped machine: the tables of transition.go and kind.go.
var Default Machine

// tables is a machine's content; a Machine never changes it once built.
type tables struct {
	triggers    []Trigger
	transitions []Transition
	kinds       []Kind
	index       map[edge]Transition
}

// shipped is Default's tables.
var shipped = newTables(triggers, transitions, kinds)

func newTables(trs []Trigger, rows []Transition, ks []Kind) *tables {
	t := &tables{triggers: trs, transitions: fillMessages(rows, ks), kinds: ks,
		index: make(map[edge]Transition, len(rows))}
	for _, r := range t.transitions {
		t.index[edge{r.From, r.Trigger}] = r
	}
	return t
}

func (m Machine) tables() *tables {
	if m.t == nil {
		return shipped
	}
	return m.t
}

// Extension is what Machine.With adds: the recipe's edits of
// transition.go (new triggers, their rows) and kind.go (their kinds).
type Extension struct {
	// Triggers are the new triggers, in order after the machine's own:
	// a new timer's step runs after the table's.
	Triggers []Trigger
	// Transitions are the new rows; a new timer's rows carry its Clock
	// and Wait, and their Message comes from Kinds.
	Transitions []Transition
	// Kinds are the new kinds of message.
	Kinds []Kind
}

// ErrInvalidExtension is wrapped by every error With returns.
var ErrInvalidExtension = errors.New("invalid extension of the state machine")

// With returns m with e's rows added, or an error wrapping
// ErrInvalidExtension that names the first row that does not fit: a
// trigger m has already, a row whose states or trigger are unknown or
// whose (state, trigger) has a row already, a timer whose rows disagree on
// their clock or wait, or a kind that is not whole (see checkKind). m is
// unchanged.
func (m Machine) With(e Extension) (Machine, error) {
	cur := m.tables()
	trs := slices.Concat(cur.triggers, e.Triggers)
	for i, t := range e.Triggers {
		if t == "" || slices.Contains(cur.triggers, t) || slices.Contains(e.Triggers[:i], t) {
			return m, fmt.Errorf("%w: trigger %q is empty or declared already", ErrInvalidExtension, t)
		}
	}
	next := newTables(trs, slices.Concat(cur.transitions, e.Transitions), slices.Concat(m.Kinds(), e.Kinds))
	if err := next.checkRows(e.Transitions); err != nil {
		return m, err
	}
	for _, k := range e.Kinds {
		if err := next.checkKind(k); err != nil {
			return m, fmt.Errorf("%w: kind %s: %w", ErrInvalidExtension, k.Message, err)
		}
	}
	return Machine{t: next}, nil
}

// checkRows checks rows, already in t, against the rest of t.
func (t *tables) checkRows(rows []Transition) error {
	seen := map[edge]int{}
	for _, r := range t.transitions {
		seen[edge{r.From, r.Trigger}]++
	}
	for _, r := range rows {
		_, clock := clockWords[r.Clock]
		switch first := t.first(r.Trigger); {
		case !r.From.Valid() || !r.To.Valid() || !slices.Contains(t.triggers, r.Trigger):
			return fmt.Errorf("%w: row %s -%s-> %s: unknown state or trigger", ErrInvalidExtension, r.From, r.Trigger, r.To)
		case seen[edge{r.From, r.Trigger}] > 1:
			return fmt.Errorf("%w: row %s -%s->: the state has a row for the trigger already", ErrInvalidExtension, r.From, r.Trigger)
		case r.Clock != NoClock && !clock:
			return fmt.Errorf("%w: row %s -%s->: unknown clock %q", ErrInvalidExtension, r.From, r.Trigger, r.Clock)
		case first.Clock != r.Clock || first.Wait != r.Wait:
			return fmt.Errorf("%w: row %s -%s->: every row of a trigger has the same clock and wait", ErrInvalidExtension, r.From, r.Trigger)
		}
	}
	return nil
}

// checkKind reports what makes k, a row of t, not whole: a name, key
// infix or trigger another kind has, no catalog key, no period, no send-time state or
// an unknown one, a trigger t does not know, a one-per-period check
// without a plural or on an instant, or no Meta pricing category.
func (t *tables) checkKind(k Kind) error {
	same := 0
	for _, o := range t.kinds {
		if o.Message == k.Message || o.KeyInfix == k.KeyInfix || k.Trigger != "" && o.Trigger == k.Trigger {
			same++
		}
	}
	switch {
	case same > 1:
		return errors.New("its name, key infix or trigger is another kind's")
	case k.Message == NoMessage || k.KeyInfix == "" || k.CatalogKey == "":
		return errors.New("no name, key infix or catalog key")
	case !slices.Contains([]Period{PerDay, PerISOWeek, PerInstant}, k.Period):
		return fmt.Errorf("period %q is not one of day, week, instant", k.Period)
	case len(k.SendWhile) == 0 || slices.ContainsFunc(k.SendWhile, func(s State) bool { return !s.Valid() }):
		return fmt.Errorf("send-time states %q: none, or not states (every message would be cancelled as stale)", k.SendWhile)
	case k.Trigger != "" && !slices.Contains(t.triggers, k.Trigger):
		return fmt.Errorf("trigger %q is not a trigger", k.Trigger)
	case (k.Check == "") != (k.Plural == "") || k.Check != "" && k.Period == PerInstant:
		return errors.New("a one-per-period check needs a plural and a period that is a span")
	case !k.Category.Valid():
		return fmt.Errorf("pricing category %q is not one of Meta's (%v)", k.Category, Categories())
	}
	return nil
}

// first is the first row of trigger tr.
func (t *tables) first(tr Trigger) Transition {
	for _, r := range t.transitions {
		if r.Trigger == tr {
			return r
		}
	}
	return Transition{}
}

// Triggers returns m's triggers in a fixed order: the scheduler triggers
// first, then the bot triggers, then any With added. The slice is a fresh
// copy.
func (m Machine) Triggers() []Trigger { return slices.Clone(m.tables().triggers) }

// Transitions returns m's transition table in a deterministic order. The
// slice is a copy: changing it does not change the table.
func (m Machine) Transitions() []Transition { return slices.Clone(m.tables().transitions) }

// Next returns the transition trigger t causes from state from in m, or a
// *TransitionError wrapping ErrInvalidTransition if there is none.
func (m Machine) Next(from State, t Trigger) (Transition, error) {
	tr, ok := m.tables().index[edge{from, t}]
	if !ok {
		return Transition{}, &TransitionError{From: from, Trigger: t}
	}
	return tr, nil
}

// Timers returns m's rows that are timers (a Clock), one per trigger (its
// first row), in the order of m's triggers: the daily job's steps, in the
// order it runs them.
func (m Machine) Timers() []Transition {
	var out []Transition
	for _, t := range m.tables().triggers {
		if first := m.tables().first(t); first.Clock != NoClock {
			out = append(out, first)
		}
	}
	return out
}

// Wait is the wait of timer t in m (see Transition.Wait): 0 for a trigger
// that is not a timer, and for a timer due at its clock.
func (m Machine) Wait(t Trigger) time.Duration { return m.tables().first(t).Wait }

// FromStates lists every state m moves to t.To on t.Trigger, t.From
// first: one step of the daily job moves them all in one pass.
func (m Machine) FromStates(t Transition) []State {
	from := []State{t.From}
	for _, o := range m.tables().transitions {
		if o.Trigger == t.Trigger && o.To == t.To && o.From != t.From {
			from = append(from, o.From)
		}
	}
	return from
}

// Kinds returns m's message kinds in a fixed order: the shipped ones
// (goodbye, weekly_review, reminder, opt_out_confirmation), then any With
// added. The slice and its rows are copies.
func (m Machine) Kinds() []Kind {
	ks := m.tables().kinds
	out := make([]Kind, len(ks))
	for i, k := range ks {
		k.SendWhile = slices.Clone(k.SendWhile)
		out[i] = k
	}
	return out
}

// KindOf returns m's kind named msg, and false if there is none.
func (m Machine) KindOf(msg Message) (Kind, bool) {
	for _, k := range m.Kinds() {
		if k.Message == msg {
			return k, true
		}
	}
	return Kind{}, false
}

// KindFiredBy returns the kind trigger t queues in m, on request or not,
// and false if it queues none.
func (m Machine) KindFiredBy(t Trigger) (Kind, bool) {
	for _, k := range m.Kinds() {
		if t != "" && k.Trigger == t {
			return k, true
		}
	}
	return Kind{}, false
}

// fillMessages fills each row's Message from the kinds ks.
func fillMessages(rows []Transition, ks []Kind) []Transition {
	rows = slices.Clone(rows)
	for i, r := range rows {
		rows[i].Message = NoMessage
		for _, k := range ks {
			if r.Trigger != "" && k.Trigger == r.Trigger && !k.OnRequest {
				rows[i].Message = k.Message
			}
		}
	}
	return rows
}
