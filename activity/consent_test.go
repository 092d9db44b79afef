package activity_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// consentEvent is one row of engagement_consent_events.
type consentEvent struct {
	OptedOut   bool
	Source     string
	Actor      *string
	At         time.Time
	Superseded bool // older than a wish the user made later (migration 68)
}

func consentEvents(t *testing.T, db fixture.DB, user string) []consentEvent {
	t.Helper()
	out := []consentEvent{}
	for _, e := range fixture.ConsentEventsOf(t, db, user) {
		out = append(out, consentEvent{OptedOut: e.OptedOut, Source: e.Source, Actor: e.Actor, At: e.At, Superseded: e.Superseded})
	}
	return out
}

// withMessages makes a user with a pending, a processing and a sent message.
func withMessages(t *testing.T, db fixture.DB) string {
	t.Helper()
	user := fixture.User(t, db, fixture.UserOptions{LastActivity: time.Now().Add(-20 * 24 * time.Hour)})
	now := fixture.Now(t, db)
	for _, status := range []string{"pending", "processing", "sent"} {
		m := fixture.Message{User: user, Type: "weekly_review", CatalogKey: "engagement.weekly_review.celebration",
			JID: "55@s.whatsapp.net", ScheduledFor: now, Key: user + ":" + status, Status: status}
		if status == "sent" {
			m.SentAt = now
		}
		id := fixture.Queue(t, db, m)
		if status == "processing" {
			fixture.SetMessages(t, db, fixture.MessageChange{ID: id, ClaimedBy: "h", ClaimedUntil: now.Add(time.Minute)})
		}
	}
	return user
}

// Issue 44: an opt-out is one call that writes the flag, records the
// change and cancels what waits; repeated, it changes and records
// nothing; an opt-in reverses the flag (nothing is requeued) and is
// recorded too.
func TestOptOutAndInAreRecordedOnce(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	user := withMessages(t, tx)
	at := fixture.Now(t, tx).Add(-time.Minute).Truncate(time.Microsecond)

	changed, err := activity.OptOut(ctx, tx, user, activity.SourceKeyword, activity.ConsentOptions{At: at})
	if err != nil || !changed {
		t.Fatalf("OptOut: %v, %v; want a change", changed, err)
	}
	if changed, err := activity.OptOut(ctx, tx, user, activity.SourceMetaPreferences, activity.ConsentOptions{}); err != nil || changed {
		t.Errorf("OptOut again: %v, %v; want no change", changed, err)
	}
	if optedOut := fixture.ProfileOf(t, tx, user).ReengagementOptOut; !optedOut {
		t.Errorf("reengagement_opt_out %v, want true", optedOut)
	}
	got := statusesOf(t, tx, user)
	if got["pending"] != "cancelled:opted_out" || got["processing"] != "processing" || got["sent"] != "sent" {
		t.Errorf("messages after the opt-out: %v; want the pending one cancelled (opted_out), the others as they were", got)
	}

	if changed, err := activity.OptIn(ctx, tx, user, activity.SourceConsole, activity.ConsentOptions{Actor: "ops"}); err != nil || !changed {
		t.Errorf("OptIn: %v, %v; want a change", changed, err)
	}
	if changed, err := activity.OptIn(ctx, tx, user, activity.SourceConsole, activity.ConsentOptions{Actor: "ops"}); err != nil || changed {
		t.Errorf("OptIn again: %v, %v; want no change", changed, err)
	}
	ev := consentEvents(t, tx, user)
	if len(ev) != 2 || !ev[0].OptedOut || ev[0].Source != activity.SourceKeyword || !ev[0].At.Equal(at) || ev[0].Actor != nil ||
		ev[1].OptedOut || ev[1].Source != activity.SourceConsole || ev[1].Actor == nil || *ev[1].Actor != "ops" {
		t.Errorf("consent events %+v; want the keyword's opt-out at %s, then ops's opt-in on the console", ev, at)
	}
	if got := statusesOf(t, tx, user); got["pending"] != "cancelled:opted_out" {
		t.Errorf("an opt-in requeued %v; want the cancelled message left cancelled", got)
	}
}

// What a consent call refuses changes nothing: an unknown user, no
// source, an instant no clock can mean.
func TestConsentRefusals(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	user := withMessages(t, tx)
	call := func(f func() (bool, error)) error {
		var err error
		_ = pgx.BeginFunc(ctx, tx, func(pgx.Tx) error { _, err = f(); return err })
		return err
	}
	for name, c := range map[string]struct {
		err error
		f   func() (bool, error)
	}{
		"unknown user": {activity.ErrUnknownUser, func() (bool, error) {
			return activity.OptOut(ctx, tx, "00000000-0000-4000-8000-00000000dead", activity.SourceKeyword, activity.ConsentOptions{})
		}},
		"no source": {activity.ErrNoSource, func() (bool, error) {
			return activity.OptOut(ctx, tx, user, "  ", activity.ConsentOptions{})
		}},
		"a future instant": {activity.ErrInstantOutOfRange, func() (bool, error) {
			return activity.OptOut(ctx, tx, user, activity.SourceKeyword, activity.ConsentOptions{At: time.Now().Add(time.Hour)})
		}},
	} {
		if err := call(c.f); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", name, err, c.err)
		}
	}
	if ev := consentEvents(t, tx, user); len(ev) != 0 {
		t.Errorf("refused calls recorded %+v", ev)
	}
	if got := statusesOf(t, tx, user); got["pending"] != "pending" {
		t.Errorf("refused calls changed the messages: %v", got)
	}
}

// WhatsApp's 131050 in a receipt (the user stopped marketing messages
// from this business) opts the user out, recorded as its source.
func TestError131050OptsTheUserOut(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	user := withMessages(t, tx)
	fixture.SetMessages(t, tx, fixture.MessageChange{User: user, Status: "sent", ProviderID: "wamid.131050"})
	if _, _, err := receiptIn(ctx, tx, "wamid.131050", activity.ReceiptFailed, activity.ReceiptOptions{ErrorCode: "131050"}); err != nil {
		t.Fatal(err)
	}
	ev := consentEvents(t, tx, user)
	if len(ev) != 1 || !ev[0].OptedOut || ev[0].Source != activity.SourceWhatsApp131050 {
		t.Errorf("consent events after a 131050: %+v; want one opt-out from %s", ev, activity.SourceWhatsApp131050)
	}
	if got := statusesOf(t, tx, user); got["pending"] != "cancelled:opted_out" || got["sent"] != "failed" {
		t.Errorf("messages after a 131050: %v; want the pending one cancelled and the refused one failed", got)
	}
}

// Through PgBouncer in transaction mode, on the binaries' pool: the calls
// keep no session state.
func TestConsentThroughATransactionPooler(t *testing.T) {
	t.Parallel()
	direct, pooled := pgtest.NewPooledDatabase(t)
	ctx := context.Background()
	pool, err := postgres.Open(ctx, pooled, "consent-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	check, err := postgres.Open(ctx, direct, "consent-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(check.Close)
	user := withMessages(t, check)
	for i, optOut := range []bool{true, true, false, true} {
		f := activity.OptIn
		if optOut {
			f = activity.OptOut
		}
		if _, err := f(ctx, pool, user, activity.SourceKeyword, activity.ConsentOptions{}); err != nil {
			t.Fatalf("call %d through PgBouncer: %v", i, err)
		}
	}
	if ev := consentEvents(t, check, user); len(ev) != 3 {
		t.Errorf("%d consent events through PgBouncer, want 3 (out, in, out)", len(ev))
	}
}

// statusesOf is the user's messages' status by idempotency-key suffix
// (pending, processing, sent), with the cancel reason of a cancelled one.
func statusesOf(t *testing.T, db fixture.DB, user string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range fixture.MessageRows(t, db, fixture.Messages{Users: []string{user}}) {
		_, suffix, _ := strings.Cut(deref(m.IdempotencyKey), ":")
		suffix, _, _ = strings.Cut(suffix, ":")
		out[suffix] = m.Status
		if m.CancelReason != nil {
			out[suffix] += ":" + *m.CancelReason
		}
	}
	return out
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Issue 44: the opt-out's confirmation is off by default. Asked for, the
// opt-out that changes something queues one message of the kind
// opt_out_confirmation, to the user's route, under the kind's key for the
// opt-out's instant, beside cancelling what waited; a repeated opt-out
// queues nothing more, and one said more than 24 hours ago (replayed from
// old history) gets no answer days late.
func TestOptOutConfirmationIsQueuedOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	ctx := context.Background()
	kind, ok := sm.KindOf(sm.OptOutConfirmationMessage)
	if !ok || !kind.ConfirmsOptOut {
		t.Fatalf("the kind %s is missing or does not confirm opt-outs: %+v", sm.OptOutConfirmationMessage, kind)
	}
	confirmations := func(user string) (out []string) {
		t.Helper()
		out = []string{}
		for _, m := range fixture.MessageRows(t, tx, fixture.Messages{Users: []string{user}, Type: string(sm.OptOutConfirmationMessage)}) {
			out = append(out, deref(m.IdempotencyKey)+" "+deref(m.MessageKey)+" "+m.Status+" "+m.DestinationJID)
		}
		return out
	}

	silent := withMessages(t, tx)
	if _, err := activity.OptOut(ctx, tx, silent, activity.SourceKeyword, activity.ConsentOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := confirmations(silent); len(got) != 0 {
		t.Errorf("an opt-out without Confirm queued %v; want nothing (off by default)", got)
	}

	jid := "5511987654321@s.whatsapp.net"
	asked := fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now(), WhatsAppJID: &jid})
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for i := range 2 {
		changed, err := activity.OptOut(ctx, tx, asked, activity.SourceKeyword, activity.ConsentOptions{At: at, Confirm: true})
		if err != nil || changed != (i == 0) {
			t.Fatalf("opt-out %d with Confirm: changed %v, %v; want %v", i+1, changed, err, i == 0)
		}
	}
	want := kind.Key(asked, at) + " " + kind.CatalogKey + " pending " + jid
	if got := confirmations(asked); len(got) != 1 || got[0] != want {
		t.Errorf("confirmations after two opt-outs with Confirm: %q; want one, %q", got, want)
	}

	late := fixture.User(t, tx, fixture.UserOptions{LastActivity: time.Now()})
	changed, err := activity.OptOut(ctx, tx, late, activity.SourceKeyword,
		activity.ConsentOptions{At: time.Now().Add(-25 * time.Hour), Confirm: true})
	if err != nil || !changed {
		t.Fatalf("an opt-out said 25 hours ago: changed %v, %v; want true", changed, err)
	}
	if got := confirmations(late); len(got) != 0 {
		t.Errorf("an opt-out said 25 hours ago queued %v; want no confirmation (outside the 24 hours)", got)
	}
}
