package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/verify"
)

// The race's size: users (in four groups, interleaved on the table's
// pages), bot connections, and how many calls each connection makes: at
// least raceMinCalls, and on for as long as a job runs, up to raceMaxCalls.
const (
	raceUsers    = 400
	raceBots     = 6
	raceMinCalls = 60
	raceMaxCalls = 3000
)

// The users' groups: what the daily job has to do on them at the race's
// as-of, and where they start.
const (
	raceInactive = 'A' // active, silent 14 days 6 hours: the job queues their goodbye
	raceGoodbye  = 'B' // goodbye_sent, delivered 71 h before: the job times them out
	raceReminder = 'C' // remind_later, remind_at an hour before: the job moves them to dormant
	raceDormant  = 'D' // dormant: only the bot moves them
)

// raceStart is each group's state when it is created (group B gets its
// goodbye from a run three days before the race, which logs its move).
var raceStart = map[byte]sm.State{
	raceInactive: sm.Active, raceGoodbye: sm.Active, raceReminder: sm.RemindLater, raceDormant: sm.Dormant,
}

// raceAnswers are the bot's answers to the goodbye and where each goes.
var raceAnswers = map[sm.Trigger]sm.State{
	sm.GoodbyeAnswerHelp:        sm.HelpFlow,
	sm.GoodbyeAnswerRemindLater: sm.RemindLater,
	sm.GoodbyeAnswerDormant:     sm.Dormant,
}

// raceCall is one engagement_fire call of a bot connection.
type raceCall struct {
	user    string
	trigger sm.Trigger
	at      time.Time
	key     string // the request key: the WhatsApp message id
	retry   bool   // a second call with another call's key (a retried webhook)
	state   sm.State
	err     error
	during  bool // it returned while a job was still running
}

// Issue 32, "Racing the jobs": bot moves and the daily job run at the same
// time on the same users. 400 users on whom the daily job has work (silent
// 14 days: a goodbye; a goodbye delivered 71 hours ago: timed out; a
// reminder due: dormant; and dormant users only the bot moves) are raced,
// behind one start barrier, by two daily runs as of the same instant (the
// second waits for the first's lease, then sweeps what is left) and six bot
// connections firing engagement_fire: user_message on any user, the three
// goodbye answers on any user (refused with EN004 unless the user is in
// goodbye_sent at that instant), some of them retried with the same request
// key from another connection. The bots fire for as long as a job runs.
// Time is the jobs' as-of and the calls' At, never a sleep.
//
// Whatever the interleaving, afterwards:
//   - no call failed but the expected refusals (EN004 from a state other
//     than goodbye_sent), each call returned the state its move leads to,
//     and a repeated request key returned the first call's state;
//   - every state change is logged, once: replaying each user's log from
//     where the user started, every row starts where the previous ended,
//     is a row of the state machine's table, and ends in the user's state;
//     the bot's accepted answers are logged exactly once per request key,
//     the jobs' moves as their summaries count them, none failed;
//   - every goodbye_sent user has their goodbye queued (for the UTC day of
//     goodbye_sent_at), every goodbye a move to goodbye_sent logged by the
//     same run; a user who wrote after the job queued their goodbye is
//     active, their log shows the move out of goodbye_sent, and the goodbye
//     is pending (queue-process cancels it as stale);
//   - verify holds as of the race's as-of, every check;
//   - one more daily run (the next run, which handles the users the bot
//     held locked) leaves nothing for a further run to do, every
//     remind_later user waits on a remind_at the bot set, and engagementctl
//     verify a day later (no user stuck past the as-of's deadlines) exits 0.
func TestDailyRacesTheBotsMovesOnTheSameUsers(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Noon UTC two days ago: a past instant, far from a UTC day's edge.
	at := time.Now().UTC().Truncate(day).Add(-2*day + 12*time.Hour)
	seed := uint64(time.Now().UnixNano())
	t.Logf("as-of %s, seed %d", at.Format(time.RFC3339), seed)

	groupOf, byGroup := raceSetup(t, pool, at)
	setup := runDaily(t, pool, scheduler.Config{AsOf: at.Add(-71 * time.Hour), Logger: zerolog.Nop()})
	if n := len(byGroup[raceGoodbye]); setup.Succeeded != n || setup.Queued != n || setup.Failed != 0 {
		t.Fatalf("the run three days before: %+v; want group B's %d goodbyes queued, and nothing else", setup.Counts, n)
	}
	fixture.SetMessages(t, pool, fixture.MessageChange{Type: "goodbye", SetStatus: "sent", SentAt: at.Add(-71*time.Hour + time.Minute)})

	// The race. Every connection is open before the barrier.
	var (
		start    = make(chan struct{})
		wg       sync.WaitGroup
		jobsLeft atomic.Int32
		sums     = make([]*scheduler.Summary, 2)
		jobErrs  = make([]error, 2)
		calls    = make([][]raceCall, raceBots)
		retries  = make(chan raceCall, 256)
	)
	jobsLeft.Store(int32(len(sums)))
	for j := range sums {
		jobPool := raceJobPool(t, url)
		wg.Go(func() {
			defer jobsLeft.Add(-1)
			<-start
			sums[j], jobErrs[j] = scheduler.RunDaily(ctx, jobPool, scheduler.Config{AsOf: at, BatchSize: 16, Concurrency: 2, Logger: zerolog.Nop()})
		})
	}
	for b := range raceBots {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		rng := rand.New(rand.NewPCG(seed, uint64(b))) //nolint:gosec // seeded (and logged): a failing interleaving can be replayed
		wg.Go(func() {
			<-start
			for i := 0; i < raceMaxCalls && (i < raceMinCalls || jobsLeft.Load() > 0); i++ {
				var c raceCall
				select {
				case c = <-retries:
					c.retry = true
				default:
					c = raceNextCall(rng, byGroup, at, fmt.Sprintf("wamid.race.%d.%d", b, i))
					if rng.IntN(8) == 0 {
						select {
						case retries <- c: // fired again, by whichever connection takes it
						default:
						}
					}
				}
				c.state, c.err = activity.Fire(ctx, conn, c.user, c.trigger, activity.FireOptions{At: c.at, RequestKey: c.key})
				c.during = jobsLeft.Load() > 0
				calls[b] = append(calls[b], c)
			}
		})
	}
	close(start)
	wg.Wait()

	runIDs := map[int64]bool{}
	for j, sum := range sums {
		if jobErrs[j] != nil {
			t.Fatalf("daily run %d during the race: %v", j, jobErrs[j])
		}
		if sum.Failed != 0 || sum.Duplicates != 0 {
			t.Errorf("daily run %d during the race: %+v, %v; want no user failed and no goodbye already queued", j, sum.Counts, sum.Errors)
		}
		runIDs[sum.RunID] = true
	}
	all := slices.Concat(calls...)
	checkRaceCalls(t, pool, all)
	checkRaceRuns(t, pool, sums)
	w := readRaceWorld(t, pool)
	w.check(t, "after the race", groupOf)

	wrote := w.wroteAfterTheirGoodbye(t, runIDs)
	// How the race went, for the log: the interleaving is the scheduler's
	// and the server's, so none of it is asserted.
	during := 0
	for _, c := range all {
		if c.during {
			during++
		}
	}
	t.Logf("bot calls: %d (%d while a job ran, %d retried keys); %d users wrote after the job queued their goodbye; %s",
		len(all), during, countRetries(all), wrote, raceOutcomes(all))
	for j, sum := range sums {
		for _, st := range sum.Steps {
			t.Logf("run %d (%d ms) step %s: moved %d, queued %d, skipped %v", j, sum.DurationMS, st.Name, st.Succeeded, st.Queued, st.SkipReasons)
		}
	}

	rep, err := verify.Run(ctx, pool, verify.Config{AsOf: at})
	if err != nil {
		t.Fatalf("verify after the race: %v", err)
	}
	if !rep.OK {
		for _, c := range rep.Checks {
			if !c.OK {
				t.Errorf("verify after the race: %s broken, %d violations: %q", c.Name, c.Violations, c.Examples)
			}
		}
	}

	// The next run: the users the bot held while the racing runs passed
	// them, and those the bot moved back into a job's path, are moved;
	// after it, a run as of the same instant finds nothing to do.
	next := runDaily(t, pool, scheduler.Config{AsOf: at, Logger: zerolog.Nop()})
	if next.Failed != 0 || next.Skipped != 0 || next.Duplicates != 0 {
		t.Errorf("the next run: %+v; want nothing failed, skipped or already queued", next.Counts)
	}
	again := runDaily(t, pool, scheduler.Config{AsOf: at, Logger: zerolog.Nop()})
	if again.Processed != 0 || again.Queued != 0 || again.Skipped != 0 {
		t.Errorf("a run after the next: %+v; want nothing left to do", again.Counts)
	}
	checkRaceRuns(t, pool, []*scheduler.Summary{next})
	w = readRaceWorld(t, pool)
	w.check(t, "after the next run", groupOf)
	for id, u := range w.users {
		if u.state == sm.RemindLater && (u.remindAt == nil || u.remindAt.Before(at.Add(sm.RemindLaterPeriod))) {
			t.Errorf("after the next run, user %s (group %c) is remind_later until %v: a reminder due at the as-of was left behind", id, groupOf[id], u.remindAt)
		}
	}
	res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+url),
		"verify", "--as-of", at.Add(day).Format(time.RFC3339), "--output", "json")
	if res.Code != 0 {
		t.Errorf("engagementctl verify a day after the race: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
}

// raceSetup creates the race's users, set-based, their groups interleaved
// (A B C D in proportions 10:4:3:3 every 20 rows): each chunk of the job
// holds every kind. It returns each user's group and each group's users.
func raceSetup(t *testing.T, pool *pgxpool.Pool, at time.Time) (map[string]byte, map[byte][]string) {
	t.Helper()
	groupOf := map[string]byte{}
	byGroup := map[byte][]string{}
	for _, u := range fixture.RaceUsers(t, pool, raceUsers, fixture.RaceGroups{A: at.Add(-14*day - 6*time.Hour),
		B: at.Add(-30 * day), C: at.Add(-20 * day), D: at.Add(-40 * day), RemindAt: at.Add(-time.Hour)}) {
		groupOf[u.ID] = u.Group[0]
		byGroup[u.Group[0]] = append(byGroup[u.Group[0]], u.ID)
	}
	return groupOf, byGroup
}

// raceJobPool is a pool of one daily run's own: its batches and its lock.
func raceJobPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := postgres.PoolConfig(context.Background(), url, "engagement-daily")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // not the binaries' pool: PoolConfig's, with one run's four connections
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// raceNextCall is a bot's next call: a user of the jobs' groups more often
// than a dormant one; an answer to the goodbye seven times in eight (the
// user may not be in goodbye_sent: refused), else user_message. Messages
// arrive from an hour before the as-of to an hour after, answers in the
// hour after it (after the goodbye they answer).
func raceNextCall(rng *rand.Rand, byGroup map[byte][]string, at time.Time, key string) raceCall {
	var g byte
	switch r := rng.IntN(20); {
	case r < 8:
		g = raceInactive
	case r < 14:
		g = raceGoodbye
	case r < 17:
		g = raceReminder
	default:
		g = raceDormant
	}
	c := raceCall{user: byGroup[g][rng.IntN(len(byGroup[g]))], key: key}
	switch rng.IntN(8) {
	case 0:
		c.trigger = sm.UserMessage
		c.at = at.Add(-time.Hour + time.Duration(rng.IntN(7200))*time.Second)
	case 1, 2, 3:
		c.trigger = sm.GoodbyeAnswerHelp
	case 4, 5:
		c.trigger = sm.GoodbyeAnswerRemindLater
	default:
		c.trigger = sm.GoodbyeAnswerDormant
	}
	if c.at.IsZero() {
		c.at = at.Add(time.Duration(rng.IntN(3600)) * time.Second)
	}
	return c
}

// checkRaceCalls checks every bot call's outcome: user_message always moves
// the user to active; an answer moves them where the table says, or is
// refused (EN004) from a state other than goodbye_sent; nothing else fails.
// A request key's calls all return the state of the one that moved the
// user, which engagement_fire_requests holds; each accepted answer is
// logged once (per key), and no more user_message moves are logged than
// calls were accepted.
func checkRaceCalls(t *testing.T, pool *pgxpool.Pool, calls []raceCall) {
	t.Helper()
	type userTrigger struct {
		user    string
		trigger sm.Trigger
	}
	accepted := map[string]sm.State{} // by request key
	keysOf := map[userTrigger]map[string]bool{}
	for _, c := range calls {
		var te *sm.TransitionError
		switch {
		case c.err == nil:
			want := sm.Active
			if c.trigger != sm.UserMessage {
				want = raceAnswers[c.trigger]
			}
			if c.state != want {
				t.Errorf("%s on user %s (key %s): returned %q, want %q", c.trigger, c.user, c.key, c.state, want)
			}
			if s, ok := accepted[c.key]; ok && s != c.state {
				t.Errorf("key %s: one call returned %q, another %q", c.key, s, c.state)
			}
			accepted[c.key] = c.state
			ut := userTrigger{c.user, c.trigger}
			if keysOf[ut] == nil {
				keysOf[ut] = map[string]bool{}
			}
			keysOf[ut][c.key] = true
		case c.trigger != sm.UserMessage && errors.As(c.err, &te):
			if te.From == sm.GoodbyeSent || te.Trigger != c.trigger || !slices.Contains(sm.States(), te.From) {
				t.Errorf("%s on user %s (key %s) refused with %v: from %q; only a user no longer in goodbye_sent may be refused",
					c.trigger, c.user, c.key, c.err, te.From)
			}
		default:
			t.Errorf("%s on user %s (key %s): %v; want no error but EN004 on an answer", c.trigger, c.user, c.key, c.err)
		}
	}

	stored := fixture.FireRequests(t, pool)
	if len(stored) != len(accepted) {
		t.Errorf("engagement_fire_requests holds %d keys, want the %d keys whose call moved the user", len(stored), len(accepted))
	}
	for k, s := range accepted {
		if stored[k] != string(s) {
			t.Errorf("key %s: engagement_fire_requests says %q, the calls returned %q", k, stored[k], s)
		}
	}

	loggedOf := map[userTrigger]int{} // the moves the bot's calls logged
	for _, l := range fixture.LogRows(t, pool, fixture.Logged{}) {
		if l.JobRunID == nil {
			loggedOf[userTrigger{l.UserID, sm.Trigger(l.Trigger)}]++
		}
	}
	for ut, n := range loggedOf {
		keys := len(keysOf[ut])
		switch {
		case ut.trigger == sm.UserMessage && n > keys:
			t.Errorf("user %s: %d user_message moves logged, but only %d calls accepted", ut.user, n, keys)
		case ut.trigger != sm.UserMessage && n != keys:
			t.Errorf("user %s: %d %s moves logged, want %d (one per accepted request key)", ut.user, n, ut.trigger, keys)
		}
	}
	for ut, keys := range keysOf {
		if ut.trigger != sm.UserMessage && loggedOf[ut] != len(keys) {
			t.Errorf("user %s: %d accepted %s calls (keys) but %d logged", ut.user, len(keys), ut.trigger, loggedOf[ut])
		}
	}
}

// checkRaceRuns checks that each run logged exactly the moves its summary
// counts, step by step, each goodbye it queued beside the move it logged
// (same user, same run), and nothing else.
func checkRaceRuns(t *testing.T, pool *pgxpool.Pool, sums []*scheduler.Summary) {
	t.Helper()
	for _, sum := range sums {
		want := map[string]int{}
		for _, st := range sum.Steps {
			want[st.Name] += st.Succeeded
		}
		got := map[string]int{}            // moves logged by step (goodbye_undelivered is the timeout step's)
		movedToGoodbye := map[string]int{} // by user
		for _, l := range fixture.LogRows(t, pool, fixture.Logged{RunID: sum.RunID}) {
			step := l.Trigger
			if step == string(sm.GoodbyeUndelivered) {
				step = string(sm.GoodbyeTimeout)
			}
			got[step]++
			if l.Trigger == string(sm.Inactivity14d) && l.ToState == "goodbye_sent" {
				movedToGoodbye[l.UserID]++
			}
		}
		for name := range want {
			if want[name] == 0 {
				delete(want, name)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("run %d logged %v, its summary counts %v moved", sum.RunID, got, want)
		}
		if n := fixture.CountMessages(t, pool, fixture.Messages{RunID: sum.RunID}); n != sum.Queued {
			t.Errorf("run %d queued %d messages, its summary says %d", sum.RunID, n, sum.Queued)
		}
		n := 0
		for _, m := range fixture.MessageRows(t, pool, fixture.Messages{RunID: sum.RunID, Type: "goodbye"}) {
			if movedToGoodbye[m.UserID] != 1 {
				n++
			}
		}
		if n != 0 {
			t.Errorf("run %d: %d goodbyes queued without their user's move to goodbye_sent logged once by the run", sum.RunID, n)
		}
	}
}

// raceUser is a user's engagement row.
type raceUser struct {
	state          sm.State
	goodbyeSentAt  *time.Time
	remindAt       *time.Time
	lastActivityAt time.Time
}

// raceLogRow is a row of the transition log.
type raceLogRow struct {
	from, to sm.State
	trigger  sm.Trigger
	runID    *int64
}

// raceGoodbyeRow is a queued goodbye.
type raceGoodbyeRow struct {
	user, key, status string
	runID             *int64
}

// raceWorld is every user, log row and goodbye, read after the writers
// stopped.
type raceWorld struct {
	users    map[string]raceUser
	logs     map[string][]raceLogRow // by user, oldest first
	goodbyes map[string]raceGoodbyeRow
}

func readRaceWorld(t *testing.T, pool *pgxpool.Pool) raceWorld {
	t.Helper()
	w := raceWorld{users: map[string]raceUser{}, logs: map[string][]raceLogRow{}, goodbyes: map[string]raceGoodbyeRow{}}
	for _, u := range fixture.StateRows(t, pool) {
		w.users[u.UserID] = raceUser{sm.State(u.State), u.GoodbyeSentAt, u.RemindAt, u.LastActivityAt}
	}
	for _, l := range fixture.LogRows(t, pool, fixture.Logged{}) {
		w.logs[l.UserID] = append(w.logs[l.UserID], raceLogRow{sm.State(l.FromState), sm.State(l.ToState), sm.Trigger(l.Trigger), l.JobRunID})
	}
	for _, m := range fixture.MessageRows(t, pool, fixture.Messages{Type: "goodbye"}) {
		if m.IdempotencyKey == nil {
			t.Fatalf("goodbye %s of %s queued without a key", m.ID, m.UserID)
		}
		g := raceGoodbyeRow{user: m.UserID, key: *m.IdempotencyKey, status: m.Status, runID: m.JobRunID}
		if _, dup := w.goodbyes[g.key]; dup {
			t.Errorf("goodbye key %s queued twice", g.key)
		}
		w.goodbyes[g.key] = g
	}
	return w
}

// check asserts what must hold whatever the interleaving: every user's log
// replays, from where the user started, row after row along the state
// machine's table, to the user's state (nothing unlogged, nothing lost);
// goodbye_sent users have their goodbye, for the day of goodbye_sent_at,
// and remind_later users a remind_at.
func (w raceWorld) check(t *testing.T, when string, groupOf map[string]byte) {
	t.Helper()
	goodbye, _ := sm.KindOf(sm.GoodbyeMessage)
	if len(w.users) != len(groupOf) {
		t.Errorf("%s: %d users, want %d", when, len(w.users), len(groupOf))
	}
	for id, u := range w.users {
		cur := raceStart[groupOf[id]]
		for i, l := range w.logs[id] {
			tr, err := sm.Next(l.from, l.trigger)
			if l.from != cur || err != nil || tr.To != l.to {
				t.Errorf("%s: user %s (group %c), log row %d %s -%s-> %s: the user was %s before it, and the table says %v, %v"+
					" (a change not logged, or logged but not made)", when, id, groupOf[id], i, l.from, l.trigger, l.to, cur, tr.To, err)
			}
			cur = l.to
		}
		if cur != u.state {
			t.Errorf("%s: user %s (group %c) is %s, but their log ends in %s (%d rows): a change not logged",
				when, id, groupOf[id], u.state, cur, len(w.logs[id]))
		}
		switch u.state {
		case sm.GoodbyeSent:
			if u.goodbyeSentAt == nil {
				t.Errorf("%s: user %s is goodbye_sent without goodbye_sent_at", when, id)
			} else if g, ok := w.goodbyes[goodbye.Key(id, *u.goodbyeSentAt)]; !ok || g.user != id {
				t.Errorf("%s: user %s is goodbye_sent since %s without that day's goodbye queued: a goodbye they will never be asked about",
					when, id, u.goodbyeSentAt.UTC().Format(time.RFC3339))
			}
		case sm.RemindLater:
			if u.remindAt == nil {
				t.Errorf("%s: user %s is remind_later without remind_at: nobody moves them", when, id)
			}
		}
	}
}

// wroteAfterTheirGoodbye checks the users whose goodbye one of the runs
// queued but who are active: each wrote after the job queued it, so their
// log shows the job's move to goodbye_sent, then the bot's move out of it,
// and ends with user_message; their goodbye stays pending, for
// queue-process to cancel as stale. It returns how many there are.
func (w raceWorld) wroteAfterTheirGoodbye(t *testing.T, runIDs map[int64]bool) int {
	t.Helper()
	n := 0
	keys := make([]string, 0, len(w.goodbyes))
	for k := range w.goodbyes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g := w.goodbyes[k]
		if g.runID == nil || !runIDs[*g.runID] || w.users[g.user].state != sm.Active {
			continue
		}
		n++
		log := w.logs[g.user]
		i := slices.IndexFunc(log, func(l raceLogRow) bool {
			return l.trigger == sm.Inactivity14d && l.runID != nil && *l.runID == *g.runID
		})
		last := log[len(log)-1]
		if i < 0 || i+1 >= len(log) || log[i+1].from != sm.GoodbyeSent || log[i+1].runID != nil ||
			last.trigger != sm.UserMessage || last.to != sm.Active {
			t.Errorf("user %s is active with the goodbye %s queued, but their log %+v does not show the job's move to goodbye_sent, "+
				"the bot's move out of it and user_message last", g.user, k, log)
		}
		if g.status != "pending" {
			t.Errorf("user %s's goodbye %s is %s, want pending (nobody sends during the race)", g.user, k, g.status)
		}
	}
	return n
}

func countRetries(calls []raceCall) int {
	n := 0
	for _, c := range calls {
		if c.retry {
			n++
		}
	}
	return n
}

// raceOutcomes summarizes the calls per trigger: accepted / refused.
func raceOutcomes(calls []raceCall) string {
	type tally struct{ ok, refused int }
	per := map[sm.Trigger]*tally{}
	for _, c := range calls {
		if per[c.trigger] == nil {
			per[c.trigger] = &tally{}
		}
		if c.err == nil {
			per[c.trigger].ok++
		} else {
			per[c.trigger].refused++
		}
	}
	s := ""
	for _, tr := range sm.Triggers() {
		if p := per[tr]; p != nil {
			s += fmt.Sprintf("%s %d accepted/%d refused; ", tr, p.ok, p.refused)
		}
	}
	return s
}
