package statemachine

// Transition is one row of the transition table.
type Transition struct {
	// From is the state the transition leaves.
	From State
	// Trigger is the event that fires the transition.
	Trigger Trigger
	// To is the state the transition enters.
	To State
	// Message is the message queued with the transition, if any: the kind
	// whose Trigger is the transition's (see Kinds), unless the kind is
	// queued only on request. Only Inactivity14d queues one, the goodbye.
	Message Message
}

// transitions is the transition table, in the order Transitions reports it.
// Each row's Message comes from the kinds table (withMessages).
var transitions = withMessages([]Transition{
	{From: Active, Trigger: Inactivity14d, To: GoodbyeSent},
	{From: Active, Trigger: UserMessage, To: Active},

	{From: GoodbyeSent, Trigger: GoodbyeTimeout, To: Dormant},
	{From: GoodbyeSent, Trigger: GoodbyeUndelivered, To: Active},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerHelp, To: HelpFlow},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerRemindLater, To: RemindLater},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerDormant, To: Dormant},
	{From: GoodbyeSent, Trigger: UserMessage, To: Active},

	{From: HelpFlow, Trigger: Inactivity14d, To: GoodbyeSent},
	{From: HelpFlow, Trigger: UserMessage, To: Active},

	{From: RemindLater, Trigger: ReminderDue, To: Dormant},
	{From: RemindLater, Trigger: UserMessage, To: Active},

	{From: Dormant, Trigger: UserMessage, To: Active},
})

// withMessages fills each row's Message from the kinds table.
func withMessages(rows []Transition) []Transition {
	for i, r := range rows {
		if k, ok := KindFiredBy(r.Trigger); ok && !k.OnRequest {
			rows[i].Message = k.Message
		}
	}
	return rows
}

// edge is the key of the transition index.
type edge struct {
	from    State
	trigger Trigger
}

// index maps (From, Trigger) to its row of the transition table.
var index = buildIndex(transitions)

func buildIndex(rows []Transition) map[edge]Transition {
	m := make(map[edge]Transition, len(rows))
	for _, r := range rows {
		m[edge{r.From, r.Trigger}] = r
	}
	return m
}

// Transitions returns the full transition table in a deterministic order.
// The slice is a copy: changing it does not change the table.
func Transitions() []Transition {
	out := make([]Transition, len(transitions))
	copy(out, transitions)
	return out
}

// Next returns the transition trigger t causes from state from, or a
// *TransitionError wrapping ErrInvalidTransition if there is none (including
// when from or t is not a known value).
func Next(from State, t Trigger) (Transition, error) {
	tr, ok := index[edge{from, t}]
	if !ok {
		return Transition{}, &TransitionError{From: from, Trigger: t}
	}
	return tr, nil
}
