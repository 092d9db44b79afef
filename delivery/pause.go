package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// Pause is engagement.Pause: the root package holds the types
// the application packages share.
type Pause = engagement.Pause

// PauseAdvice is what an operator can do about each kind of pause.
var PauseAdvice = map[string]string{
	transport.AccountReachoutTimelock: "wait: WhatsApp refuses messages to people who have not written lately until the time-lock ends; send to fewer cold contacts",
	transport.AccountRateOverlimit:    "slow down: raise --send-interval or lower --daily-limit before the pause ends",
	transport.AccountLoggedOut:        "re-link the bot's device (scan the QR code again), then clear the pause: engagementctl pause clear --transport webhook",
	transport.AccountBanned:           "appeal the ban to WhatsApp from the phone; once the number is back, clear the pause: engagementctl pause clear --transport webhook",
}

// ActivePause reads transport's active pause at the database's clock plus
// clockOffset; nil when it may send.
func ActivePause(ctx context.Context, db postgres.Querier, transportName string, clockOffset time.Duration) (*Pause, error) {
	rows, err := pauseActiveQuery.All(ctx, db, pauseActiveArgs{Transport: transportName, ClockOffset: clockOffset})
	if err != nil {
		return nil, fmt.Errorf("read the transport's pause: %w", err)
	}
	return activePause(transportName, rows), nil
}

// activePause is the pause pause_active.sql's rows say, nil for none.
func activePause(transportName string, rows []pauseActiveRow) *Pause {
	if len(rows) == 0 {
		return nil
	}
	r := rows[0]
	return &Pause{Transport: transportName, Kind: r.Kind, StatusCode: r.StatusCode, Since: r.PausedAt,
		Until: r.PausedUntil, Advice: PauseAdvice[r.Kind], Active: true}
}

// ReadPauses reads every transport's last pause, active or not, newest
// first (engagementctl pause list, status, the console).
func ReadPauses(ctx context.Context, db postgres.Querier) ([]Pause, error) {
	var out []Pause
	err := pausesQuery.Each(ctx, db, sqlfile.None{}, func(r *pausesRow) error {
		out = append(out, Pause{Transport: r.Transport, Kind: r.Kind, StatusCode: r.StatusCode, Since: r.PausedAt,
			Until: r.PausedUntil, Advice: PauseAdvice[r.Kind], PausedBy: r.PausedBy, Refusals: r.Refusals,
			ClearedAt: r.ClearedAt, ClearedBy: r.ClearedBy, Active: r.Active})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the transports' pauses: %w", err)
	}
	return out, nil
}

// ClearPause ends transport's active pause now, as by (an operator's
// name): its processes send again from their next run. It returns the
// cleared pause's kind, "" when none was active.
func ClearPause(ctx context.Context, db postgres.Querier, transportName, by string) (string, error) {
	rows, err := pauseClearQuery.All(ctx, db, pauseClearArgs{Transport: transportName, ClearedBy: by})
	if err != nil {
		return "", fmt.Errorf("clear the transport's pause: %w", err)
	}
	if len(rows) == 0 {
		return "", nil
	}
	return rows[0].Kind, nil
}

// errAccountPaused is why a run stopped when its transport is paused.
var errAccountPaused = errors.New("the transport's account is paused")

// pauseState is a run's knowledge of its transport's pause: nil until it
// found one or met a refusal.
type pauseState struct {
	mu    sync.Mutex
	pause *Pause
}

func (s *pauseState) get() *Pause {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pause
}

// set keeps the first pause the run met.
func (s *pauseState) set(p *Pause) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pause == nil {
		s.pause = p
	}
}

// replace makes p the run's pause, as the database recorded it.
func (s *pauseState) replace(p *Pause) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pause = p
}

// pausable reports whether the run's transport can be paused: its
// receiver reports account refusals (the webhook). Other transports read
// no pause, so their runs spend no statement on it.
func (r *run) pausable() bool {
	a, ok := r.cfg.Transport.(transport.AccountReporter)
	return ok && a.ReportsAccountErrors()
}

// paused reports whether nothing may be claimed or sent now: the run met
// a pause already, or the database has one (another process recorded
// it). Called at the start of the run and before each claim. A pause
// found stops the run.
func (r *run) paused(ctx context.Context) (bool, error) {
	return r.pausedAt(ctx, false)
}

// pausedBeforeSend is paused, before a request. Paced it reads the
// database each time, as paused does. Unpaced a statement per request cost
// more than the request (issue 59: 20,000 of them for 20,000 messages), so
// the pause is read with the wishes, in the same round trip (wishes.go),
// and a request starts only on a read sent at most WishAge before it: a
// pause another process recorded stops this one's requests within
// WishBound of its commit, as an opt-out does. One this process met stops
// them at once.
func (r *run) pausedBeforeSend(ctx context.Context) (bool, error) {
	return r.pausedAt(ctx, r.wishes != nil)
}

// pausedAt is paused, the database's pause read with the wishes (unpaced)
// or on its own.
func (r *run) pausedAt(ctx context.Context, withWishes bool) (bool, error) {
	if !r.pausable() {
		return false, nil
	}
	if r.pauses.get() != nil {
		return true, nil
	}
	if withWishes {
		if err := r.wishes.fresh(ctx); err != nil {
			return false, err
		}
		return r.pauses.get() != nil, nil
	}
	pause, err := ActivePause(ctx, r.pool, r.cfg.Transport.Name(), r.cfg.ClockOffset)
	if err != nil {
		return false, err
	}
	if pause != nil {
		r.pauseRun(pause)
	}
	return r.pauses.get() != nil, nil
}

// pauseRun stops the run for pause: no claim and no send starts after it.
func (r *run) pauseRun(pause *Pause) {
	r.pauses.set(pause)
	r.stop(errAccountPaused)
}

// accountRefused settles m, whose request the receiver answered with a
// refusal of the whole account: the run stops at once (in memory, then in
// the database, so that every other process stops at its next check), and
// m goes back to the queue unsent, due as it was, its retries unspent. Its
// budget slot stays spent: its request reached the receiver, and a
// refused attempt may count with WhatsApp as one (the budget is never
// exceeded, ../shared/CONTRACT.md round seven, "A crash tells the truth").
func (r *run) accountRefused(log zerolog.Logger, m claimed, acct *transport.AccountError) error {
	pause := &Pause{Transport: r.cfg.Transport.Name(), Kind: acct.Kind, StatusCode: acct.Err.StatusCode,
		Since: r.clock().Add(r.cfg.ClockOffset), Advice: PauseAdvice[acct.Kind], Active: true}
	if acct.RetryAfter > 0 {
		until := pause.Since.Add(acct.RetryAfter)
		pause.Until = &until
	}
	r.pauseRun(pause)
	log.Warn().Str("kind", acct.Kind).Int("status", pause.StatusCode).Dur("retry_after", acct.RetryAfter).
		Msg("the receiver refused the whole account: pausing the transport; the messages wait, pending")
	recorded, err := r.recordPause(acct)
	if recorded != nil {
		r.pauses.replace(recorded) // the summary says the pause as recorded: another process's may end later
	}
	return errors.Join(err, r.releaseKeepingSlots([]claimed{m}))
}

// recordPause writes the refusal to engagement_transport_pauses
// (pause_record.sql), even while the run is stopping, and reads the pause
// back as it stands.
func (r *run) recordPause(acct *transport.AccountError) (*Pause, error) {
	args := pauseRecordArgs{Transport: r.cfg.Transport.Name(), Kind: acct.Kind, StatusCode: acct.Err.StatusCode,
		ClockOffset: r.cfg.ClockOffset, Wait: acct.RetryAfter, Holder: r.holder}
	var pause *Pause
	err := retryConflicts(func(ctx context.Context) error {
		if _, err := pauseRecordQuery.Exec(ctx, r.pool, args); err != nil {
			return err
		}
		var err error
		pause, err = ActivePause(ctx, r.pool, args.Transport, args.ClockOffset)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record the transport's pause: %w", err)
	}
	return pause, nil
}
