package console

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// User is the user page.
type User struct {
	Query string `json:"-"`
	// Searched is set when the page answers a search (POST /users);
	// Matches are the users found when there are several (or none).
	Searched    bool             `json:"searched,omitempty"`
	Matches     []UserMatch      `json:"matches,omitempty"`
	Found       bool             `json:"found"`
	ID          string           `json:"id,omitempty"`
	State       *UserState       `json:"state,omitempty"`
	Transitions []UserTransition `json:"transitions,omitempty"`
	Messages    []UserMessage    `json:"messages,omitempty"`
	Consent     []ConsentChange  `json:"consent,omitempty"`
}

// ConsentChange is one change of a user's consent to re-engagement
// messages (engagement_consent_events): which way, through which door,
// by which operator (empty: none), when the user said it; or a call older
// than a wish the user made later (Superseded), which changed nothing.
type ConsentChange struct {
	OptedOut   bool      `json:"opted_out"`
	Source     string    `json:"source"`
	Actor      string    `json:"actor,omitempty"`
	At         time.Time `json:"at"`
	Superseded bool      `json:"superseded,omitempty"`
}

// UserState is a user's state, timers and profile; the JID only as its
// last four digits.
type UserState struct {
	State            string     `json:"state"`
	LastActivityAt   *time.Time `json:"last_activity_at"`
	GoodbyeSentAt    *time.Time `json:"goodbye_sent_at"`
	GoodbyeExpiresAt *time.Time `json:"goodbye_expires_at"`
	RemindAt         *time.Time `json:"remind_at"` // remind_later's timer: nil in any other state
	CreatedAt        *time.Time `json:"created_at"`
	OptedOut         bool       `json:"opted_out"`
	Destination      string     `json:"destination"`
	JID              string     `json:"jid"`
	HasProfile       bool       `json:"has_profile"`
	// GoodbyeBackoff is why the user's next goodbye waits after goodbyes
	// that failed for good (nil: it does not).
	GoodbyeBackoff *GoodbyeBackoff `json:"goodbye_backoff,omitempty"`
}

// UserTransition is one move of the user's.
type UserTransition struct {
	ID        int64     `json:"id"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Trigger   string    `json:"trigger"`
	JobRunID  *int64    `json:"job_run_id"`
	CreatedAt time.Time `json:"created_at"`
}

// By says who made the move: a job run, or the bot.
func (t UserTransition) By() string {
	if t.JobRunID != nil {
		return "job"
	}
	return "bot"
}

// UserMessage is one of the user's messages: never its text or JID.
type UserMessage struct {
	ID           string     `json:"id"`
	Kind         string     `json:"kind"`
	Status       string     `json:"status"`
	ScheduledFor time.Time  `json:"scheduled_for"`
	SentAt       *time.Time `json:"sent_at"`
	DeliveredAt  *time.Time `json:"delivered_at"` // by WhatsApp's receipt
	ReadAt       *time.Time `json:"read_at"`      // by WhatsApp's receipt
	RetryCount   int64      `json:"retry_count"`
	CancelReason string     `json:"cancel_reason,omitempty"`
	Error        string     `json:"error,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
}

const maxUserRows = 200

func (s *server) user(r *http.Request, src source) (User, error) {
	out := User{Query: strings.TrimSpace(r.URL.Query().Get("id"))}
	if out.Query == "" {
		return out, nil
	}
	id, ok := postgres.ParseUUID(out.Query)
	if !ok {
		// Not quoted back: it may be a phone number, which belongs in
		// the search form (a POST), not in a URL.
		return out, badRequestf("that is not a user id (a UUID); to find a user by phone number or JID, use the search form")
	}
	out.ID = id
	return userByID(r.Context(), src, out)
}

// userByID fills in the user out.ID names.
func userByID(ctx context.Context, src source, out User) (User, error) {
	err := src.read(ctx, func(tx pgx.Tx, _ time.Time) error {
		row, err := userStateQuery.One(ctx, tx, userStateArgs{UserID: out.ID, GoodbyeKeyInfix: goodbyeKind.KeyInfix})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		st := UserState{State: row.State, LastActivityAt: row.LastActivityAt, GoodbyeSentAt: row.GoodbyeSentAt,
			GoodbyeExpiresAt: row.GoodbyeExpiresAt, RemindAt: row.RemindAt, CreatedAt: row.CreatedAt, OptedOut: row.OptedOut,
			Destination: row.Destination, JID: row.JIDLast4, HasProfile: row.HasProfile,
			GoodbyeBackoff: goodbyeBackoff(row.GoodbyeFailures, row.GoodbyeRetryAt, row.GoodbyeHeld, row.GoodbyeFailureCode)}
		if st.JID != "" {
			st.JID = "••••" + st.JID
		}
		out.Found, out.State = true, &st
		transitions, err := userTransitionsQuery.All(ctx, tx, userTransitionsArgs{UserID: out.ID, Limit: maxUserRows})
		if err != nil {
			return err
		}
		out.Transitions = make([]UserTransition, len(transitions))
		for i, t := range transitions {
			out.Transitions[i] = UserTransition{ID: t.ID, From: t.FromState, To: t.ToState, Trigger: t.Trigger,
				JobRunID: t.JobRunID, CreatedAt: t.CreatedAt}
		}
		messages, err := userMessagesQuery.All(ctx, tx, userMessagesArgs{UserID: out.ID, Limit: maxUserRows})
		if err != nil {
			return err
		}
		out.Messages = make([]UserMessage, len(messages))
		for i, m := range messages {
			out.Messages[i] = UserMessage{ID: m.ID, Kind: m.MessageType, Status: m.Status, ScheduledFor: m.ScheduledFor,
				SentAt: m.SentAt, DeliveredAt: m.DeliveredAt, ReadAt: m.ReadAt, RetryCount: int64(m.RetryCount),
				CancelReason: m.CancelReason, Error: m.Error, CreatedAt: m.CreatedAt}
		}
		consent, err := userConsentQuery.All(ctx, tx, userConsentArgs{UserID: out.ID, Limit: maxUserRows})
		if err != nil {
			return err
		}
		out.Consent = make([]ConsentChange, len(consent))
		for i, c := range consent {
			out.Consent[i] = ConsentChange(c)
		}
		return nil
	})
	return out, err
}
