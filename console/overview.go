package console

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/funnel"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/status"
)

// Overview is the overview page: users by state, the goodbye funnel and
// the weekly reviews.
type Overview struct {
	AsOf     time.Time    `json:"as_of"`
	States   []StateCount `json:"states"`
	Users    int64        `json:"users"`
	OptedOut int64        `json:"opted_out"`
	Weeks    []StateWeek  `json:"states_by_week"`
	Funnel   []Cohort     `json:"funnel"`
	// Lift compares the goodbye's arms (the holdout's control group and
	// the users sent a goodbye), as engagementctl funnel does.
	Lift      *funnel.Report `json:"lift"`
	Reviews   []ReviewWeek   `json:"weekly_reviews"`
	StateList []string       `json:"-"`
	// Health is the summary at the top: what needs doing (health.go),
	// made when the page is served (withHealth).
	Health Health `json:"health"`
	// runs are the jobs' latest runs the health summary judges, read
	// with the rest of the page.
	runs []status.Run
}

// StateCount is how many users are in a state.
type StateCount struct {
	State string `json:"state"`
	Users int64  `json:"users"`
}

// StateWeek is users by state at the end of an ISO week (the current
// week: at as-of).
type StateWeek struct {
	WeekStart time.Time        `json:"week_start"`
	At        time.Time        `json:"at"`
	Users     map[string]int64 `json:"users"`
}

// Cohort is the goodbyes logged in one ISO week and what became of them
// (see queries/funnel.sql for each count's definition).
type Cohort struct {
	WeekStart time.Time `json:"week_start"`
	Goodbyes  int64     `json:"goodbyes"`
	// Accepted goodbyes WhatsApp (or the bot) took; of them, Delivered and
	// Read by its receipts, and FailedLate failed after acceptance.
	// Receipts is how many any receipt reached: 0 when nobody passes them
	// on, and then Delivered and Read say nothing.
	Accepted            int64 `json:"accepted"`
	Delivered           int64 `json:"delivered"`
	Read                int64 `json:"read"`
	FailedLate          int64 `json:"failed_late"`
	Receipts            int64 `json:"receipts"`
	AnsweredHelp        int64 `json:"answered_help"`
	AnsweredRemindLater int64 `json:"answered_remind_later"`
	AnsweredNotNow      int64 `json:"answered_not_now"`
	CameBack            int64 `json:"came_back"`
	TimedOut            int64 `json:"timed_out"`
	Undelivered         int64 `json:"undelivered"`
	Waiting             int64 `json:"waiting"`
	Reactivated         int64 `json:"reactivated"`
	// ReactivatedShare is Reactivated / Goodbyes (0 without goodbyes).
	ReactivatedShare float64 `json:"reactivated_share"`
	// WindowClosed is true when every goodbye of the week has had its
	// whole reactivation window: the share is final.
	WindowClosed bool `json:"window_closed"`
}

// ReviewWeek is the weekly reviews covering one ISO week.
type ReviewWeek struct {
	WeekStart time.Time `json:"week_start"`
	Queued    int64     `json:"queued"`
	Sent      int64     `json:"sent"`
}

func (s *server) overview(ctx context.Context, src source) (Overview, error) {
	var o Overview
	var runs []status.Run
	for _, st := range sm.States() {
		o.StateList = append(o.StateList, string(st))
	}
	err := src.read(ctx, func(tx pgx.Tx, asOf time.Time) error {
		o.AsOf = asOf
		users, err := status.ReadUsers(ctx, tx)
		if err != nil {
			return err
		}
		o.States = make([]StateCount, len(users.ByState))
		for i, c := range users.ByState {
			o.States[i] = StateCount{State: c.State, Users: c.Users}
		}
		o.Users, o.OptedOut = users.Total, users.OptedOut
		if o.Weeks, err = statesWeekly(ctx, tx, asOf, o.StateList, o.States); err != nil {
			return err
		}
		if o.Funnel, err = goodbyeFunnel(ctx, tx, asOf); err != nil {
			return err
		}
		if o.Lift, err = funnel.Read(ctx, tx, funnel.Options{AsOf: asOf, Weeks: Weeks}); err != nil {
			return err
		}
		reviews, err := reviewsWeeklyQuery.All(ctx, tx, reviewsWeeklyArgs{
			AsOf: asOf, Weeks: Weeks, MessageType: string(sm.WeeklyReviewMessage),
		})
		if err != nil {
			return err
		}
		o.Reviews = make([]ReviewWeek, len(reviews))
		for i, r := range reviews {
			o.Reviews[i] = ReviewWeek(r)
		}
		all, err := status.ReadRuns(ctx, tx, 1)
		runs = latestRuns(all)
		return err
	})
	if err != nil {
		return o, err
	}
	o.runs = runs
	return o, nil
}

// statesWeekly reads the users by state at the end of each of the last
// Weeks ISO weeks, the current one from now's counts.
func statesWeekly(ctx context.Context, tx pgx.Tx, asOf time.Time, states []string, now []StateCount) ([]StateWeek, error) {
	var nowStates []string
	var nowUsers []int64
	for _, c := range now {
		nowStates, nowUsers = append(nowStates, c.State), append(nowUsers, c.Users)
	}
	var out []StateWeek
	err := statesWeeklyQuery.Each(ctx, tx, statesWeeklyArgs{
		AsOf: asOf, Weeks: Weeks, States: states, InitialState: string(sm.Active),
		NowStates: nowStates, NowUsers: nowUsers,
	}, func(w *statesWeeklyRow) error {
		if len(out) == 0 || !out[len(out)-1].WeekStart.Equal(w.WeekStart) {
			out = append(out, StateWeek{WeekStart: w.WeekStart.UTC(), At: w.WeekEnd.UTC(), Users: map[string]int64{}})
		}
		out[len(out)-1].Users[w.State] = w.Users
		return nil
	})
	return out, err
}

// goodbyeFunnel reads the goodbye funnel, its triggers and states from the
// state machine's table.
func goodbyeFunnel(ctx context.Context, tx pgx.Tx, asOf time.Time) ([]Cohort, error) {
	var out []Cohort
	err := funnelQuery.Each(ctx, tx, funnelArgs{
		AsOf:               asOf,
		Weeks:              Weeks,
		Window:             ReactivationWindow,
		GoodbyeTrigger:     string(sm.Inactivity14d),
		GoodbyeState:       string(sm.GoodbyeSent),
		GoodbyeKind:        string(sm.GoodbyeMessage),
		ComebackTrigger:    string(sm.UserMessage),
		AnswerHelp:         string(sm.GoodbyeAnswerHelp),
		AnswerRemindLater:  string(sm.GoodbyeAnswerRemindLater),
		AnswerDormant:      string(sm.GoodbyeAnswerDormant),
		TimeoutTrigger:     string(sm.GoodbyeTimeout),
		UndeliveredTrigger: string(sm.GoodbyeUndelivered),
	}, func(r *funnelRow) error {
		c := Cohort{WeekStart: r.WeekStart.UTC(), Goodbyes: r.Goodbyes, Accepted: r.Accepted, Delivered: r.Delivered,
			Read: r.Read, FailedLate: r.FailedLate, Receipts: r.Receipts, AnsweredHelp: r.AnsweredHelp,
			AnsweredRemindLater: r.AnsweredRemindLater, AnsweredNotNow: r.AnsweredNotNow, CameBack: r.CameBack,
			TimedOut: r.TimedOut, Undelivered: r.Undelivered, Waiting: r.Waiting, Reactivated: r.Reactivated,
			WindowClosed: r.WindowClosed}
		if c.Goodbyes > 0 {
			c.ReactivatedShare = float64(c.Reactivated) / float64(c.Goodbyes)
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// withHealth completes the overview's snapshot when it is served: the
// health summary from its jobs' latest runs and the queue and verify
// pages' snapshots as they are now. Until those pages' first snapshots are
// computed (in the background, never waited for: verify's takes minutes at
// a million users) their cards say they are being read; an overview
// computed before them shows their numbers as soon as they exist.
func (s *server) withHealth(ctx context.Context, o Overview) (Overview, error) {
	var q *Queue
	var v *Verify
	if snap, err := s.snaps.queue.peek(ctx); err != nil {
		return o, err
	} else if snap != nil {
		q = &snap.data
	}
	if snap, err := s.snaps.verify.peek(ctx); err != nil {
		return o, err
	} else if snap != nil {
		v = &snap.data
	}
	o.Health = health(o.AsOf, q, v, o.runs)
	return o, nil
}
