package statemachine

import "time"

// Change is what applying a trigger at an instant does to a user's row.
type Change struct {
	Transition
	// At is the instant the trigger fired.
	At time.Time
	// GoodbyeSentAt is set by Inactivity14d to At; nil otherwise.
	GoodbyeSentAt *time.Time
	// GoodbyeExpiresAt is set by Inactivity14d to At + GoodbyeWindow; nil
	// otherwise.
	GoodbyeExpiresAt *time.Time
	// RemindAt is set by GoodbyeAnswerRemindLater to At + RemindLaterPeriod;
	// nil otherwise.
	RemindAt *time.Time
}

// Fire applies trigger t to state from at instant at and returns the
// resulting Change, or the error Next returns if the transition is invalid.
// Timestamps that the transition does not set are left nil.
func Fire(from State, t Trigger, at time.Time) (Change, error) {
	tr, err := Next(from, t)
	if err != nil {
		return Change{}, err
	}
	c := Change{Transition: tr, At: at}
	switch t {
	case Inactivity14d:
		sent, expires := at, at.Add(GoodbyeWindow)
		c.GoodbyeSentAt, c.GoodbyeExpiresAt = &sent, &expires
	case GoodbyeAnswerRemindLater:
		remind := at.Add(RemindLaterPeriod)
		c.RemindAt = &remind
	}
	return c, nil
}
