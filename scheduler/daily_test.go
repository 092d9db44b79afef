package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/scheduler"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// asOf is a late-evening instant in São Paulo that is already the next day
// in UTC: day keys must use the UTC date, 2026-11-23.
var asOf = time.Date(2026, 11, 22, 23, 30, 0, 0, time.FixedZone("BRT", -3*3600))

const wantKeyDate = "2026-11-23"

func runDaily(t *testing.T, pool *pgxpool.Pool, cfg scheduler.Config) *scheduler.Summary {
	t.Helper()
	if cfg.AsOf.IsZero() {
		cfg.AsOf = asOf
	}
	sum, err := scheduler.RunDaily(context.Background(), pool, cfg)
	if err != nil {
		t.Fatalf("RunDaily: %v", err)
	}
	return sum
}

// logged is a transition log holding one row.
func logged(from, to, trigger string) []fixture.Transition {
	return []fixture.Transition{{From: from, To: to, Trigger: trigger}}
}

func stepOf(t *testing.T, sum *scheduler.Summary, name string) scheduler.Counts {
	t.Helper()
	for _, s := range sum.Steps {
		if s.Name == name {
			return s.Counts
		}
	}
	t.Fatalf("summary has no step %q: %+v", name, sum.Steps)
	return scheduler.Counts{}
}

func TestDailyScenarios(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ago := func(d time.Duration) time.Time { return asOf.Add(-d) }
	day := 24 * time.Hour

	inactive13d := fixture.User(t, pool, fixture.UserOptions{LastActivity: ago(13 * day)})
	inactiveExactly14d := fixture.User(t, pool, fixture.UserOptions{LastActivity: ago(14 * day)})
	inactive14d := fixture.User(t, pool, fixture.UserOptions{LastActivity: ago(14*day + time.Minute)})
	inactive40d := fixture.User(t, pool, fixture.UserOptions{LastActivity: ago(40 * day)})
	optedOut := fixture.User(t, pool, fixture.UserOptions{LastActivity: ago(30 * day), OptedOut: true})
	toGroup := fixture.User(t, pool, fixture.UserOptions{LastActivity: ago(20 * day),
		Destination: "group", GroupJID: fixture.Ptr("120363000000000001@g.us"), WhatsAppJID: fixture.Ptr("5511900000001@s.whatsapp.net")})
	groupFallback := fixture.User(t, pool, fixture.UserOptions{LastActivity: ago(20 * day),
		Destination: "group", WhatsAppJID: fixture.Ptr("5511900000002@s.whatsapp.net")})
	noDestination := fixture.User(t, pool, fixture.UserOptions{LastActivity: ago(20 * day), WhatsAppJID: fixture.NoJID})

	goodbye := func(sentAgo time.Duration, optOut bool) string {
		sent := ago(sentAgo)
		return fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: ago(30 * day),
			GoodbyeSentAt: &sent, GoodbyeExpiresAt: fixture.Ptr(sent.Add(48 * time.Hour)), OptedOut: optOut})
	}
	goodbye47h := goodbye(47*time.Hour, false)
	goodbye48h := goodbye(48*time.Hour, false)
	goodbye72h := goodbye(72*time.Hour, false)
	goodbyeOptedOut := goodbye(72*time.Hour, true)
	// A goodbye recorded by the bot without a deadline expires 48 h after it was sent.
	goodbyeNoDeadline := fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: ago(30 * day),
		GoodbyeSentAt: fixture.Ptr(ago(49 * time.Hour))})

	remindDue := fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: ago(20 * day), RemindAt: fixture.Ptr(ago(time.Hour))})
	remindNow := fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: ago(20 * day), RemindAt: fixture.Ptr(asOf)})
	remindLater := fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: ago(20 * day), RemindAt: fixture.Ptr(asOf.Add(time.Hour))})
	dormant := fixture.User(t, pool, fixture.UserOptions{State: "dormant", LastActivity: ago(90 * day)})
	helpFlow := fixture.User(t, pool, fixture.UserOptions{State: "help_flow", LastActivity: ago(5 * day)})
	helpFlowSilent := fixture.User(t, pool, fixture.UserOptions{State: "help_flow", LastActivity: ago(20 * day)})
	remindOptedOut := fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: ago(20 * day), RemindAt: fixture.Ptr(ago(time.Hour)), OptedOut: true})

	sum := runDaily(t, pool, scheduler.Config{Logger: zerolog.Nop()})

	tests := []struct {
		name      string
		user      string
		wantState string
		wantMsgs  int
		wantLog   []fixture.Transition
	}{
		{"13 days inactive: nothing", inactive13d, "active", 0, nil},
		{"exactly 14 days: not yet (last_activity_at < as-of - 14 d)", inactiveExactly14d, "active", 0, nil},
		{"14 days and a minute: goodbye", inactive14d, "goodbye_sent", 1, logged("active", "goodbye_sent", "inactivity_14d")},
		{"40 days: goodbye", inactive40d, "goodbye_sent", 1, logged("active", "goodbye_sent", "inactivity_14d")},
		{"opted out: untouched", optedOut, "active", 0, nil},
		{"group destination: goodbye", toGroup, "goodbye_sent", 1, logged("active", "goodbye_sent", "inactivity_14d")},
		{"group without group JID: goodbye to the individual", groupFallback, "goodbye_sent", 1, logged("active", "goodbye_sent", "inactivity_14d")},
		{"no destination: untouched", noDestination, "active", 0, nil},
		{"goodbye 47 h ago: nothing", goodbye47h, "goodbye_sent", 0, nil},
		{"goodbye 48 h ago: dormant", goodbye48h, "dormant", 0, logged("goodbye_sent", "dormant", "goodbye_timeout")},
		{"goodbye 72 h ago: dormant", goodbye72h, "dormant", 0, logged("goodbye_sent", "dormant", "goodbye_timeout")},
		{"goodbye expired, opted out: the timer completes silently", goodbyeOptedOut, "dormant", 0, logged("goodbye_sent", "dormant", "goodbye_timeout")},
		{"goodbye without deadline, 49 h ago: dormant", goodbyeNoDeadline, "dormant", 0, logged("goodbye_sent", "dormant", "goodbye_timeout")},
		{"reminder due: dormant", remindDue, "dormant", 0, logged("remind_later", "dormant", "reminder_due")},
		{"reminder due right now: dormant", remindNow, "dormant", 0, logged("remind_later", "dormant", "reminder_due")},
		{"reminder not yet due: nothing", remindLater, "remind_later", 0, nil},
		{"dormant: nothing", dormant, "dormant", 0, nil},
		{"help flow, silent 5 days: nothing", helpFlow, "help_flow", 0, nil},
		{"help flow, silent 20 days: back on the inactivity path, goodbye", helpFlowSilent, "goodbye_sent", 1, logged("help_flow", "goodbye_sent", "inactivity_14d")},
		{"reminder due, opted out: dormant silently", remindOptedOut, "dormant", 0, logged("remind_later", "dormant", "reminder_due")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fixture.StateOf(t, pool, tt.user).State; got != tt.wantState {
				t.Errorf("state = %q, want %q", got, tt.wantState)
			}
			if got := fixture.MessagesOf(t, pool, tt.user); len(got) != tt.wantMsgs {
				t.Errorf("queued %d messages, want %d: %+v", len(got), tt.wantMsgs, got)
			}
			got := fixture.TransitionsOf(t, pool, tt.user)
			if fmt.Sprint(got) != fmt.Sprint(tt.wantLog) {
				t.Errorf("transition log = %v, want %v", got, tt.wantLog)
			}
		})
	}

	t.Run("goodbye message, key and timestamps", func(t *testing.T) {
		msgs := fixture.MessagesOf(t, pool, inactive14d)
		if len(msgs) != 1 {
			t.Fatalf("want one message, got %+v", msgs)
		}
		m := msgs[0]
		wantKey := inactive14d + ":goodbye_sent:" + wantKeyDate
		if m.IdempotencyKey == nil || *m.IdempotencyKey != wantKey {
			t.Errorf("idempotency key = %v, want %q (UTC date of the as-of instant)", m.IdempotencyKey, wantKey)
		}
		if m.Type != "goodbye" || m.Key == nil || *m.Key != "engagement.goodbye.self_select" || m.Status != "pending" {
			t.Errorf("message = %+v, want a pending goodbye with key engagement.goodbye.self_select", m)
		}
		if m.Destination != "individual" || m.DestinationJID != "55119"+inactive14d[:8]+"@s.whatsapp.net" {
			t.Errorf("routed to %s %q, want the individual JID", m.Destination, m.DestinationJID)
		}
		st := fixture.StateOf(t, pool, inactive14d)
		if st.GoodbyeSentAt == nil || !st.GoodbyeSentAt.Equal(asOf) {
			t.Errorf("goodbye_sent_at = %v, want the as-of instant %v", st.GoodbyeSentAt, asOf)
		}
		if st.GoodbyeExpiresAt == nil || !st.GoodbyeExpiresAt.Equal(asOf.Add(48*time.Hour)) {
			t.Errorf("goodbye_expires_at = %v, want as-of + 48 h", st.GoodbyeExpiresAt)
		}
	})

	t.Run("routing", func(t *testing.T) {
		for _, c := range []struct {
			user, dest, jid string
		}{
			{toGroup, "group", "120363000000000001@g.us"},
			{groupFallback, "individual", "5511900000002@s.whatsapp.net"},
		} {
			m := fixture.MessagesOf(t, pool, c.user)
			if len(m) != 1 || m[0].Destination != c.dest || m[0].DestinationJID != c.jid {
				t.Errorf("user %s: got %+v, want one message to %s %s", c.user, m, c.dest, c.jid)
			}
		}
	})

	t.Run("summary", func(t *testing.T) {
		checks := []struct {
			name      string
			got, want int
		}{
			{"inactivity processed", stepOf(t, sum, "inactivity_14d").Processed, 5},
			{"inactivity queued", stepOf(t, sum, "inactivity_14d").Queued, 5},
			{"inactivity skipped (opted out + no destination)", stepOf(t, sum, "inactivity_14d").Skipped, 2},
			{"inactivity skipped opted out", stepOf(t, sum, "inactivity_14d").SkipReasons[sm.SkipOptedOut], 1},
			{"inactivity skipped no destination", stepOf(t, sum, "inactivity_14d").SkipReasons[sm.SkipNoDestination], 1},
			{"timeout processed", stepOf(t, sum, "goodbye_timeout").Processed, 4},
			{"timeout skipped", stepOf(t, sum, "goodbye_timeout").Skipped, 0},
			{"reminder processed", stepOf(t, sum, "reminder_due").Processed, 3},
			{"reminder skipped", stepOf(t, sum, "reminder_due").Skipped, 0},
			{"total processed", sum.Processed, 12},
			{"total succeeded", sum.Succeeded, 12},
			{"total failed", sum.Failed, 0},
			{"total skipped", sum.Skipped, 2},
			{"total queued", sum.Queued, 5},
			{"total duplicates", sum.Duplicates, 0},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
			}
		}
		if sum.RunID == 0 {
			t.Error("summary has no run id")
		}
		if run := fixture.RunOf(t, pool, sum.RunID); run.Status != "succeeded" || run.Processed == nil || *run.Processed != 12 {
			t.Errorf("job run record: status %q processed %v; want succeeded, 12", run.Status, run.Processed)
		}
		if n := fixture.CountMessages(t, pool, fixture.Messages{RunID: sum.RunID}); n != 5 {
			t.Errorf("%d goodbyes carry the run's id, want all 5 it queued", n)
		}
	})
}

// TestDailyInvariantViolationsCatchEachBreak holds the check the kill and
// concurrency tests lean on: zero after a clean run, and one for each way a
// user can be half-moved.
func TestDailyInvariantViolationsCatchEachBreak(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 12, asOf.Add(-20*24*time.Hour))
	runDaily(t, pool, scheduler.Config{Logger: zerolog.Nop()})
	if v := fixture.DailyInvariantViolations(t, pool); v != 0 {
		t.Fatalf("a clean run: %d violations, want 0", v)
	}
	one := `(SELECT user_id FROM user_engagement_states ORDER BY user_id LIMIT 1)`
	for _, tt := range []struct{ name, breaks string }{
		{"goodbye_sent without its goodbye", `DELETE FROM engagement_message_queue WHERE user_id = ` + one},
		{"goodbye_sent without its log row", `DELETE FROM engagement_state_transitions WHERE user_id = ` + one},
		{"a second log row", `INSERT INTO engagement_state_transitions (user_id, from_state, to_state, trigger)
		     SELECT user_id, from_state, to_state, trigger FROM engagement_state_transitions WHERE user_id = ` + one},
		{"a goodbye for another day", `UPDATE engagement_message_queue
		     SET period_start = period_start - interval '1 day', replay_until = replay_until - interval '1 day' WHERE user_id = ` + one},
		{"a goodbye keyed for longer than its day", `UPDATE engagement_message_queue
		     SET replay_until = replay_until + interval '1 day' WHERE user_id = ` + one},
		{"an active user with a goodbye", `UPDATE user_engagement_states SET state = 'active' WHERE user_id = ` + one},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := pool.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
			if _, err := tx.Exec(t.Context(), tt.breaks); err != nil {
				t.Fatal(err)
			}
			if v := fixture.DailyInvariantViolations(t, tx); v != 1 {
				t.Errorf("%d violations, want 1", v)
			}
		})
	}
}

func TestDailyRerunSameDayChangesNothing(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 50, asOf.Add(-20*24*time.Hour))
	sent := asOf.Add(-50 * time.Hour)
	fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: asOf.Add(-30 * 24 * time.Hour), GoodbyeSentAt: &sent, GoodbyeExpiresAt: fixture.Ptr(sent.Add(48 * time.Hour))})

	first := runDaily(t, pool, scheduler.Config{Logger: zerolog.Nop(), BatchSize: 7})
	if first.Processed != 51 || first.Queued != 50 {
		t.Fatalf("first run: processed %d queued %d, want 51 and 50", first.Processed, first.Queued)
	}
	snapshot := func() string { return dbSnapshot(t, pool, false) }
	before := snapshot()
	second := runDaily(t, pool, scheduler.Config{Logger: zerolog.Nop()})
	if second.Processed != 0 || second.Queued != 0 || second.Duplicates != 0 || second.Failed != 0 {
		t.Errorf("re-run: %+v, want nothing processed or queued", second.Counts)
	}
	if after := snapshot(); after != before {
		t.Errorf("re-run changed the database: before %s, after %s", before, after)
	}
	if v := fixture.DailyInvariantViolations(t, pool); v != 0 {
		t.Errorf("%d users violate the daily invariants", v)
	}
}

func TestDailyFailingUserFailsAlone(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 40, asOf.Add(-20*24*time.Hour))
	bad := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * 24 * time.Hour)})
	fixture.Refuse(t, pool, "user_engagement_states", bad)

	// One batch holds everyone, so the bad user shares a statement with all 40.
	sum := runDaily(t, pool, scheduler.Config{Logger: zerolog.Nop(), BatchSize: 1000})

	if sum.Failed != 1 || sum.Succeeded != 40 || sum.Processed != 41 || sum.Queued != 40 {
		t.Errorf("counters %+v, want 1 failed, 40 succeeded and queued, 41 processed", sum.Counts)
	}
	if len(sum.Errors) != 1 || sum.Errors[0].UserID != bad || sum.Errors[0].Step != "inactivity_14d" {
		t.Errorf("errors = %+v, want the one bad user in inactivity_14d", sum.Errors)
	}
	if st := fixture.StateOf(t, pool, bad).State; st != "active" {
		t.Errorf("bad user state = %q, want it left active", st)
	}
	if msgs := fixture.MessagesOf(t, pool, bad); len(msgs) != 0 {
		t.Errorf("bad user has %d messages, want none", len(msgs))
	}
	if n := fixture.CountStates(t, pool, fixture.States{State: "goodbye_sent"}); n != 40 {
		t.Errorf("%d users moved, want the other 40", n)
	}
	if status := fixture.RunStatus(t, pool, sum.RunID); status != "partial" {
		t.Errorf("run status %q, want partial", status)
	}
	if v := fixture.DailyInvariantViolations(t, pool); v != 0 {
		t.Errorf("%d users violate the daily invariants", v)
	}
}

func TestDailyConcurrentRunsQueueOneGoodbyeEach(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	const users = 3000
	fixture.InactiveUsers(t, pool, users, asOf.Add(-20*24*time.Hour))

	var (
		wg   sync.WaitGroup
		sums = make([]*scheduler.Summary, 3)
		errs = make([]error, 3)
	)
	for i := range sums {
		wg.Go(func() {
			sums[i], errs[i] = scheduler.RunDaily(context.Background(), pool, scheduler.Config{AsOf: asOf, BatchSize: 250, Logger: zerolog.Nop()})
		})
	}
	wg.Wait()
	processed, queued := 0, 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		processed += sums[i].Processed
		queued += sums[i].Queued
	}
	if processed != users || queued != users {
		t.Errorf("the runs together processed %d and queued %d, want %d each", processed, queued, users)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Type: "goodbye"}); n != users {
		t.Errorf("%d goodbyes queued, want %d", n, users)
	}
	if n := fixture.CountTransitions(t, pool, fixture.Moves{DistinctUsers: true}); n != users {
		t.Errorf("%d users logged, want %d", n, users)
	}
	if n := fixture.CountTransitions(t, pool, fixture.Moves{}); n != users {
		t.Errorf("%d transitions logged, want one per user (%d)", n, users)
	}
	if v := fixture.DailyInvariantViolations(t, pool); v != 0 {
		t.Errorf("%d users violate the daily invariants", v)
	}
}

func TestDailyDryRunWritesNothingAndReportsTheSameCounters(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	fixture.InactiveUsers(t, pool, 30, asOf.Add(-20*24*time.Hour))
	fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * 24 * time.Hour), OptedOut: true})
	sent := asOf.Add(-50 * time.Hour)
	fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: asOf.Add(-30 * 24 * time.Hour), GoodbyeSentAt: &sent, GoodbyeExpiresAt: fixture.Ptr(sent.Add(48 * time.Hour))})
	// A user whose goodbye for the day is already queued (say, by an
	// operator) counts as a duplicate, in the dry run as in the real one.
	dup := fixture.User(t, pool, fixture.UserOptions{LastActivity: asOf.Add(-20 * 24 * time.Hour)})
	fixture.Queue(t, pool, fixture.Message{User: dup, Type: "goodbye", Key: dup + ":goodbye_sent:" + wantKeyDate})

	tables := `SELECT (SELECT count(*) FROM engagement_message_queue) + (SELECT count(*) FROM engagement_state_transitions)
	                + (SELECT count(*) FROM engagement_job_runs) + (SELECT count(*) FROM user_engagement_states WHERE state <> 'active')`
	before := fixture.Count(t, pool, tables)
	dry := runDaily(t, pool, scheduler.Config{Logger: zerolog.Nop(), DryRun: true})
	if after := fixture.Count(t, pool, tables); after != before {
		t.Fatalf("dry run wrote: %d rows before, %d after", before, after)
	}
	if !dry.DryRun || dry.RunID != 0 {
		t.Errorf("dry run summary: dry_run %v run_id %d, want true and none", dry.DryRun, dry.RunID)
	}
	real := runDaily(t, pool, scheduler.Config{Logger: zerolog.Nop()})
	if dry.Counts.Processed != real.Counts.Processed || dry.Queued != real.Queued || dry.Duplicates != real.Duplicates || dry.Skipped != real.Skipped {
		t.Errorf("dry run counted %+v, the real run %+v", dry.Counts, real.Counts)
	}
	if real.Duplicates != 1 || real.Queued != 30 || real.Processed != 32 {
		t.Errorf("real run %+v, want 32 processed, 30 queued, 1 duplicate", real.Counts)
	}
	if m := real.Messages["goodbye"]; m == nil || m.Queued != 30 || m.Duplicates != 1 {
		t.Errorf("per-type counters %+v, want goodbye queued 30, duplicates 1", real.Messages)
	}
	for typ, m := range real.Messages {
		if typ != "goodbye" && (m.Queued != 0 || m.Duplicates != 0) {
			t.Errorf("per-type counters %+v, want nothing queued but goodbyes", real.Messages)
		}
	}
}

func TestDailyAbandonedRunIsMarked(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	stale := fixture.RunningRun(t, pool, scheduler.DailyJob, "")
	runDaily(t, pool, scheduler.Config{Logger: zerolog.Nop()})
	if status := fixture.RunStatus(t, pool, stale); status != "abandoned" {
		t.Errorf("a run left 'running' by a dead process: status %q, want abandoned", status)
	}
}

// dbSnapshot is what a run that changes nothing leaves as it was: how many
// messages are queued and moves logged, and every user's state (with the
// goodbye's instants when goodbyes), in user_id order.
func dbSnapshot(t *testing.T, pool *pgxpool.Pool, goodbyes bool) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d/", fixture.CountMessages(t, pool, fixture.Messages{}), fixture.CountTransitions(t, pool, fixture.Moves{}))
	for _, u := range fixture.StateRows(t, pool) {
		b.WriteString(u.State)
		if goodbyes {
			for _, at := range []*time.Time{u.GoodbyeSentAt, u.GoodbyeExpiresAt} {
				if at == nil {
					b.WriteString(" -")
				} else {
					b.WriteString(" " + at.UTC().Format(time.RFC3339Nano))
				}
			}
		}
		b.WriteString(",")
	}
	return b.String()
}
