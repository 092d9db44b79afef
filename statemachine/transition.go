package statemachine

// Message names a side-effect message a transition queues.
type Message string

// The messages a transition may queue.
const (
	// NoMessage means the transition queues no message.
	NoMessage Message = ""
	// GoodbyeMessage is the goodbye sent to a user who went inactive.
	GoodbyeMessage Message = "goodbye"
)

// Transition is one row of the transition table.
type Transition struct {
	// From is the state the transition leaves.
	From State
	// Trigger is the event that fires the transition.
	Trigger Trigger
	// To is the state the transition enters.
	To State
	// Message is the message queued with the transition, if any; only
	// Inactivity14d queues GoodbyeMessage. (The daily job can be told to
	// queue a reminder with ReminderDue; the table does not, by default.)
	Message Message
}

// transitions is the transition table, in the order Transitions reports it.
var transitions = []Transition{
	{From: Active, Trigger: Inactivity14d, To: GoodbyeSent, Message: GoodbyeMessage},
	{From: Active, Trigger: UserMessage, To: Active},

	{From: GoodbyeSent, Trigger: GoodbyeTimeout, To: Dormant},
	{From: GoodbyeSent, Trigger: GoodbyeUndelivered, To: Active},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerHelp, To: HelpFlow},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerRemindLater, To: RemindLater},
	{From: GoodbyeSent, Trigger: GoodbyeAnswerDormant, To: Dormant},
	{From: GoodbyeSent, Trigger: UserMessage, To: Active},

	{From: HelpFlow, Trigger: Inactivity14d, To: GoodbyeSent, Message: GoodbyeMessage},
	{From: HelpFlow, Trigger: UserMessage, To: Active},

	{From: RemindLater, Trigger: ReminderDue, To: Dormant},
	{From: RemindLater, Trigger: UserMessage, To: Active},

	{From: Dormant, Trigger: UserMessage, To: Active},
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
