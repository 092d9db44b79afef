package delivery

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// BudgetWindow is the send budget's window: a budget of N lets at most N
// distinct recipients get a message on one transport in any BudgetWindow.
const BudgetWindow = 24 * time.Hour

// The send budget (queue-process --daily-limit) caps how many distinct
// recipients one transport sends to in any rolling 24 hours, across every
// process: what a WhatsApp number can take (the Cloud API's messaging
// tiers; a Baileys number that writes to thousands it has not talked to in
// weeks is the classic way to get banned). It is kept in PostgreSQL, in a
// row per transport (engagement_send_budgets) whose used counts the slots
// spent in the window, and it is spent two ways:
//
//   - With ample room (more than two claims' worth left: see tight),
//     claims run side by side as they do without a budget, and each
//     spends a slot per recipient it claimed in the claim statement itself
//     (claim.sql: one row of engagement_send_budget_claims), if they fit;
//     the row update is the only point where claims meet. Every message
//     then fits, so their order does not matter.
//   - Near the limit, a claim first locks the row (budget_lock.sql), drops
//     what left the window (budget_prune.sql), claims, and applies the
//     budget recipient by recipient in due order (budget_apply.sql: one
//     row of engagement_send_budget_recipients each, so a recipient in the
//     window already costs nothing), all in one transaction: claims take
//     the last slots one after another, oldest due first, whichever
//     process they come from. The messages over the budget go back to
//     pending, in line.
//
// A claim that finds less room than it spends (claims of other processes
// took it) fails whole, nothing claimed, and is made again under the lock.
// So the limit holds however many processes run, and the budget errs only
// on the side of sending less (a recipient of two claims made with room
// counts twice).
//
// A slot is spent when a message is claimed, not when it is sent, so two
// processes can never both spend the last one. A message handed back
// unsent gives its slot back (budget_refund.sql), also when recovery hands
// back a dead process's messages (a claim made with room lists its
// messages); one that reached the transport keeps it, whatever the
// outcome: its request may have reached WhatsApp.
//
// The messages over the budget wait in line (budget_apply.sql), each due
// when the slot forecast for it frees. The forecast is early when slots
// were spent later than it assumed; a message that comes due before its
// slot frees keeps its place: the claim says it waited (claim.sql), it
// takes a free slot before messages that did not wait, and if none is
// free it goes back to the head of the line, not the back.

// Ramp is a warm-up for a new number: Start recipients on its first day,
// Factor times more each next day, up to the budget's daily limit. That is
// how providers raise a number's tier: by the volume it has sent without
// complaint.
type Ramp struct {
	Start  int
	Factor float64
}

// WarmUp is queue-process --warm-up: the ramp for a number new to sending
// through an unofficial client (the webhook to a Baileys bot), 20
// recipients the first day and 1.5 times more each next day. Folklore,
// not a published rule: Baileys users report restrictions after 15-20
// messages a day to contacts with no past chat
// (https://github.com/WhiskeySockets/Baileys/issues/1983) and after 30-40
// to new users (#2800); the scheduler's recipients all wrote to the bot
// within the reach-out window, and the start stays under the 30-40. The
// factor is this project's choice (docs/baileys.md).
var WarmUp = Ramp{Start: 20, Factor: 1.5}

// WarmUpLimit is the daily limit --warm-up grows to when none is given:
// docs/delivery.md's budget for the webhook, reached on the ramp's eighth
// day (20, 30, 45, 67, 101, 151, 227, then 300).
const WarmUpLimit = 300

// Set reports whether r is a ramp (the zero value is none).
func (r Ramp) Set() bool { return r.Start > 0 }

// String formats r as ParseRamp reads it ("" when none).
func (r Ramp) String() string {
	if !r.Set() {
		return ""
	}
	return strconv.Itoa(r.Start) + "," + strconv.FormatFloat(r.Factor, 'f', -1, 64)
}

// ParseRamp reads START,FACTOR: a positive whole number of recipients for
// the first day and a growth factor of 1 or more per day ("250,2").
func ParseRamp(s string) (Ramp, error) {
	start, factor, ok := strings.Cut(strings.TrimSpace(s), ",")
	n, errN := strconv.Atoi(strings.TrimSpace(start))
	f, errF := strconv.ParseFloat(strings.TrimSpace(factor), 64)
	switch {
	case !ok || errN != nil || errF != nil:
		return Ramp{}, fmt.Errorf("%q is not START,FACTOR (like 250,2: 250 recipients the first day, twice as many each next day)", s)
	case n < 1:
		return Ramp{}, fmt.Errorf("%q: the first day's recipients must be at least 1", s)
	case f < 1 || math.IsInf(f, 0) || f > 100:
		return Ramp{}, fmt.Errorf("%q: the factor must be from 1 to 100", s)
	}
	return Ramp{Start: n, Factor: f}, nil
}

// LimitOn is the budget on day (0: the ramp's first) under a daily limit
// of ceiling: Start × Factor^day, rounded down, never above ceiling.
func (r Ramp) LimitOn(day int, ceiling int) int {
	if !r.Set() || day < 0 {
		return min(max(r.Start, 0), ceiling)
	}
	limit := float64(r.Start) * math.Pow(r.Factor, float64(day))
	if limit >= float64(ceiling) || math.IsInf(limit, 0) || math.IsNaN(limit) {
		return ceiling
	}
	return int(limit)
}

// budget is a processor's send budget, as its run opened it.
type budget struct {
	limit int
	ramp  Ramp
	// rampStarted is the ramp's first day, on the processor's clock; the
	// clock read clockAt when the run opened the budget, at local time
	// localAt.
	rampStarted, clockAt, localAt time.Time
	// used is the recipients in the window as this processor last saw it.
	used atomic.Int64
}

// tight reports whether the window may be too full for the claims that
// can run at once (claims of this processor's size, from it and as many
// again from others): then claims take the budget's lock before they
// claim, so that the last slots go in due order. With more room, claims
// run side by side, as they do without a budget, and all they claim fits.
func (b *budget) tight(claimSize int) bool {
	return int64(b.limitNow())-b.used.Load() < int64(2*claimSize)
}

// limitNow is the number of recipients the window may hold now: the daily
// limit, or the ramp's figure for today.
func (b *budget) limitNow() int {
	if !b.ramp.Set() {
		return b.limit
	}
	now := b.clockAt.Add(time.Since(b.localAt))
	return b.ramp.LimitOn(int(now.Sub(b.rampStarted)/BudgetWindow), b.limit)
}

// openBudget records the processor's budget on its transport
// (budget_create, budget_lock, budget_prune, budget_open: the limit and
// ramp shown to operators, the ramp's first day, used counted afresh once
// what left the window is gone, so that no later prune counts it off
// again) and returns it.
func (r *run) openBudget(ctx context.Context) (*budget, error) {
	b := &budget{limit: r.cfg.DailyLimit, ramp: r.cfg.Ramp}
	transport := r.budgetKey()
	open := budgetOpenArgs{DailyLimit: r.cfg.DailyLimit, ClockOffset: r.cfg.ClockOffset, Transport: transport, Window: BudgetWindow,
		RampStart: nil, RampFactor: nil} // no ramp unless set
	if b.ramp.Set() {
		open.RampStart, open.RampFactor = &b.ramp.Start, &b.ramp.Factor
	}
	var opened budgetOpenRow
	batch := &pgx.Batch{}
	budgetCreateQuery.QueueExec(batch, budgetCreateArgs{Transport: transport, DailyLimit: r.cfg.DailyLimit})
	budgetLockQuery.QueueExec(batch, budgetLockArgs{Transport: transport})
	budgetPruneQuery.QueueExec(batch, r.budgetPruneArgs())
	budgetOpenQuery.QueueOne(batch, open, &opened)
	err := r.pool.SendBatch(ctx, batch).Close()
	b.clockAt = opened.ClockAt
	b.used.Store(int64(opened.Used))
	b.localAt = time.Now()
	if err != nil {
		return nil, fmt.Errorf("open the send budget: %w", err)
	}
	if opened.RampStartedAt != nil {
		b.rampStarted = *opened.RampStartedAt
	}
	return b, nil
}

// budgetPruneArgs are budget_prune.sql's for the processor's transport.
func (r *run) budgetPruneArgs() budgetPruneArgs {
	return budgetPruneArgs{Transport: r.budgetKey(), ClockOffset: r.cfg.ClockOffset, Window: BudgetWindow}
}

// refund gives back the budget slots of messages that leave the queue
// unsent for good (cancelled: none can be claimed again), in a
// transaction of its own under the budget's lock. A refund that fails only
// leaves the slots spent until the window turns: the budget errs on the
// side of sending less.
func (r *run) refund(ids []string, ms []claimed) {
	if r.budget == nil || len(ids) == 0 {
		return
	}
	err := retryConflicts(func(ctx context.Context) error {
		return r.inBudgetTx(ctx, true, func(tx pgx.Tx) error { return r.refundIn(ctx, tx, ids, ms) })
	})
	if err != nil {
		r.log.Warn().Err(err).Int("messages", len(ids)).
			Msg("could not give back the send budget of messages handed back unsent; their slots stay spent until the window turns")
		return
	}
	handedBack(ms)
}

// refundIn gives back, in tx, which holds the budget's lock, the slots of
// the messages ids (budget_refund.sql), and of ms, when the caller has
// them. A recovery (ms nil) has only their ids: the slots a dead holder's
// claims spent with ample room are given back from the messages each
// claim recorded, for the recipients whose messages in it all came back.
// The caller calls handedBack(ms) once tx commits.
func (r *run) refundIn(ctx context.Context, tx pgx.Tx, ids []string, ms []claimed) error {
	if r.budget == nil || len(ids) == 0 {
		return nil
	}
	claims, counts := givenBack(ms)
	_, err := budgetRefundQuery.Exec(ctx, tx, budgetRefundArgs{Claims: claims, Counts: counts, IDs: ids,
		Recovered: ms == nil, Transport: r.budgetKey()})
	return err
}

// claimSpend is the budget's slots a claim made with ample room spent
// (claim.sql): one per recipient, counted in its row id. A
// recipient's slot is given back when every message of the claim to them
// was handed back unsent.
type claimSpend struct {
	id int64
	mu sync.Mutex
	// left counts the claim's messages to each recipient not handed back.
	left map[string]int
}

// givenBack counts, per claim made with ample room, the recipients whose
// last messages of the claim are among ms: handing ms back gives their
// slots back. It changes nothing (a transaction that fails gives nothing
// back); handedBack records it once done.
func givenBack(ms []claimed) (claims []int64, counts []int) {
	type to struct {
		spend     *claimSpend
		recipient string
	}
	back := map[to]int{}
	for _, m := range ms {
		if m.spend != nil {
			back[to{m.spend, m.DestinationJID}]++
		}
	}
	given := map[int64]int{}
	for k, n := range back {
		k.spend.mu.Lock()
		left := k.spend.left[k.recipient]
		k.spend.mu.Unlock()
		if left > 0 && left <= n {
			given[k.spend.id]++
		}
	}
	for id, n := range given {
		claims, counts = append(claims, id), append(counts, n)
	}
	return claims, counts
}

// handedBack records that ms, of claims made with ample room, were handed
// back and their slots given back (givenBack).
func handedBack(ms []claimed) {
	for _, m := range ms {
		if s := m.spend; s != nil {
			s.mu.Lock()
			if s.left[m.DestinationJID] > 0 {
				s.left[m.DestinationJID]--
			}
			s.mu.Unlock()
		}
	}
}

// noRoom reports the error of a claim whose recipients do not all fit in
// the budget's window (SQLSTATE EB001, claim.sql).
func noRoom(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "EB001"
}

// lockBudget takes the transport's budget lock for tx and drops the
// recipients out of the window (budget_lock.sql, budget_prune.sql).
func (r *run) lockBudget(ctx context.Context, tx pgx.Tx) error {
	if _, err := budgetLockQuery.Exec(ctx, tx, budgetLockArgs{Transport: r.budgetKey()}); err != nil {
		return err
	}
	_, err := budgetPruneQuery.Exec(ctx, tx, r.budgetPruneArgs())
	return err
}

// holdBack applies the budget to a claimed batch in tx, under the budget's
// lock (budget_apply.sql), and returns the messages that may go. The
// caller counts the ones held back once tx commits.
func (r *run) holdBack(ctx context.Context, tx pgx.Tx, batch []claimed) ([]claimed, error) {
	if len(batch) == 0 {
		return batch, nil
	}
	// A message in doubt took its slot when the claim that may have sent
	// it was made (recover.sql keeps it), and one inside its user's
	// service window under --daily-limit auto needs none (portfolio.go):
	// neither is held back nor charged.
	ids, waited := make([]string, 0, len(batch)), make([]bool, 0, len(batch))
	for _, m := range batch {
		if !m.inDoubt && !m.inWindow {
			ids, waited = append(ids, m.ID), append(waited, m.waited)
		}
	}
	args := budgetApplyArgs{KindPriority: r.kindPriority(), Timezone: r.cfg.Timezone, IDs: ids, Waited: waited,
		Holder: r.holder, Transport: r.budgetKey(), DailyLimit: r.budget.limitNow(),
		ClockOffset: r.cfg.ClockOffset, Window: BudgetWindow,
		QuietStart: nil, QuietEnd: nil} // no quiet hours unless set
	if q := r.cfg.QuietHours; q.Set() {
		args.QuietStart, args.QuietEnd = &q.Start, &q.End
	}
	applied, err := budgetApplyQuery.One(ctx, tx, args)
	if err != nil {
		return nil, err
	}
	held := applied.Held
	r.budget.used.Store(int64(applied.Used))
	if len(held) == 0 {
		return batch, nil
	}
	out := make([]claimed, 0, len(batch)-len(held))
	for _, m := range batch {
		if !slices.Contains(held, m.ID) {
			out = append(out, m)
		}
	}
	return out, nil
}

// advanceLine moves the budget's line up when the window has room
// (budget_advance.sql) and returns how many messages it made due. When
// nothing waits on the budget, it takes no lock.
func (r *run) advanceLine(ctx context.Context) (int64, error) {
	waiting, err := budgetWaitingQuery.One(ctx, r.pool, sqlfile.None{})
	if err != nil || !waiting.Waiting {
		return 0, err
	}
	transport := r.budgetKey()
	batch := &pgx.Batch{}
	budgetLockQuery.QueueExec(batch, budgetLockArgs{Transport: transport})
	budgetPruneQuery.QueueExec(batch, r.budgetPruneArgs())
	budgetAdvanceQuery.QueueExec(batch, budgetAdvanceArgs{DailyLimit: r.budget.limitNow(), Transport: transport,
		ClockOffset: r.cfg.ClockOffset})
	br := r.pool.SendBatch(ctx, batch)
	var tag pgconn.CommandTag
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		tag, err = br.Exec()
	}
	if err = errors.Join(err, br.Close()); err != nil {
		return 0, fmt.Errorf("move the send budget's line up: %w", err)
	}
	return tag.RowsAffected(), nil
}

// BudgetState is engagement.BudgetState: the root package holds the types
// the application packages share.
type BudgetState = engagement.BudgetState

// budgetState reads the budget as the run leaves it.
func (r *run) budgetState(ctx context.Context) (*BudgetState, error) {
	s := &BudgetState{Limit: r.budget.limitNow()}
	row, err := budgetStateQuery.One(ctx, r.pool, budgetStateArgs{Transport: r.budgetKey(),
		ClockOffset: r.cfg.ClockOffset, Window: BudgetWindow})
	if err != nil {
		return nil, fmt.Errorf("read the send budget: %w", err)
	}
	s.Used, s.Waiting = row.Used, row.Waiting
	if row.Oldest != nil && s.Used >= s.Limit {
		next := row.Oldest.Add(BudgetWindow).UTC()
		s.NextSlotAt = &next
	}
	return s, nil
}

// BudgetReport is a transport's send budget as operators see it
// (engagementctl status, the console).
type BudgetReport struct {
	Transport  string `json:"transport"`
	DailyLimit int    `json:"daily_limit"` // as its processes last started
	Ramp       string `json:"ramp,omitempty"`
	// RampDay is the ramp's day now (0: its first), when ramping.
	RampDay *int `json:"ramp_day,omitempty"`
	// Limit is how many recipients the window may hold today: the daily
	// limit, or the ramp's figure.
	Limit int `json:"limit"`
	Used  int `json:"used"` // distinct recipients in the last 24 hours
	// Waiting counts the messages pending on the budget; ClearsAt is when
	// the last of them is due, as the line stands (a ramp that grows
	// meanwhile clears it sooner).
	Waiting      int        `json:"waiting"`
	ClearsAt     *time.Time `json:"clears_at,omitempty"`
	NextSlotAt   *time.Time `json:"next_slot_at,omitempty"` // when the window is full
	ConfiguredAt time.Time  `json:"configured_at"`
}

// ReadBudgets reads every transport's send budget (budgets.sql), by
// transport name; none when no queue-process ever ran with --daily-limit.
func ReadBudgets(ctx context.Context, db postgres.Querier) ([]BudgetReport, error) {
	var out []BudgetReport
	err := budgetsQuery.Each(ctx, db, budgetsArgs{Window: BudgetWindow}, func(b *budgetsRow) error {
		r := BudgetReport{Transport: b.Transport, DailyLimit: b.DailyLimit, Limit: b.DailyLimit, Used: b.Used,
			Waiting: b.Waiting, ClearsAt: b.ClearsAt, ConfiguredAt: b.ConfiguredAt}
		if b.RampStart != nil && b.RampFactor != nil {
			ramp := Ramp{Start: *b.RampStart, Factor: *b.RampFactor}
			r.Ramp = ramp.String()
			if b.RampStartedAt != nil {
				day := int(b.Now.Sub(*b.RampStartedAt) / BudgetWindow)
				r.RampDay = &day
				r.Limit = ramp.LimitOn(day, r.DailyLimit)
			}
		}
		if b.Oldest != nil && r.Used >= r.Limit {
			next := b.Oldest.Add(BudgetWindow)
			r.NextSlotAt = &next
		}
		if r.Waiting == 0 {
			r.ClearsAt = nil
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the send budgets: %w", err)
	}
	return out, nil
}
