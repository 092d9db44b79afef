package statemachine_test

import (
	"fmt"
	"time"

	"github.com/engagement-scheduler/engagement/statemachine"
)

// A user goes quiet, asks to be reminded later, never answers the reminder
// and finally comes back by writing to the bot.
func ExampleNext() {
	state := statemachine.Active
	for _, t := range []statemachine.Trigger{
		statemachine.Inactivity14d,
		statemachine.GoodbyeAnswerRemindLater,
		statemachine.ReminderDue,
		statemachine.UserMessage,
	} {
		tr, err := statemachine.Next(state, t)
		if err != nil {
			fmt.Println(err)
			return
		}
		line := fmt.Sprintf("%s -%s-> %s", tr.From, tr.Trigger, tr.To)
		if tr.Message != statemachine.NoMessage {
			line += fmt.Sprintf(" (queues %q)", tr.Message)
		}
		fmt.Println(line)
		state = tr.To
	}

	// A goodbye cannot time out for a user who never received one.
	if _, err := statemachine.Next(state, statemachine.GoodbyeTimeout); err != nil {
		fmt.Println(err)
	}
	// Output:
	// active -inactivity_14d-> goodbye_sent (queues "goodbye")
	// goodbye_sent -goodbye_answer_remind_later-> remind_later
	// remind_later -reminder_due-> dormant
	// dormant -user_message-> active
	// invalid transition: trigger "goodbye_timeout" does not apply to state "active"
}

// Fire reports the timestamps a transition writes to the user's row.
func ExampleFire() {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

	c, err := statemachine.Fire(statemachine.Active, statemachine.Inactivity14d, at)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("goodbye sent:   ", c.GoodbyeSentAt.Format(time.RFC3339))
	fmt.Println("goodbye expires:", c.GoodbyeExpiresAt.Format(time.RFC3339))

	c, err = statemachine.Fire(c.To, statemachine.GoodbyeAnswerRemindLater, at.Add(time.Hour))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("remind at:      ", c.RemindAt.Format(time.RFC3339))
	// Output:
	// goodbye sent:    2025-06-01T12:00:00Z
	// goodbye expires: 2025-06-03T12:00:00Z
	// remind at:       2025-06-15T13:00:00Z
}
