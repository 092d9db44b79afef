package statemachine_test

import (
	"testing"
	"time"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Every row of the kinds table is whole: a unique name and key infix, a
// catalog key, a period, send-time states and a trigger the state machine
// knows, a one-per-period check only where the period is a span, and one
// of Meta's pricing categories.
func TestKindsAreWhole(t *testing.T) {
	t.Parallel()
	names, infixes := map[sm.Message]bool{}, map[string]bool{}
	for _, k := range sm.Kinds() {
		if k.Message == sm.NoMessage || names[k.Message] || k.KeyInfix == "" || infixes[k.KeyInfix] || k.CatalogKey == "" {
			t.Errorf("kind %+v: want a unique name and key infix, and a catalog key", k)
		}
		names[k.Message], infixes[k.KeyInfix] = true, true
		if len(k.SendWhile) == 0 {
			t.Errorf("kind %s: no send-time states, so every one would be cancelled as stale", k.Message)
		}
		for _, s := range k.SendWhile {
			if !s.Valid() {
				t.Errorf("kind %s: send-time state %q is not a state", k.Message, s)
			}
		}
		if k.Trigger != "" && !k.Trigger.Valid() {
			t.Errorf("kind %s: trigger %q is not a trigger", k.Message, k.Trigger)
		}
		if (k.Check == "") != (k.Plural == "") || k.Check != "" && k.Period == sm.PerInstant {
			t.Errorf("kind %s: a one-per-period check needs a plural and a period that is a span", k.Message)
		}
		if !k.Category.Valid() {
			t.Errorf("kind %s: pricing category %q is not one of Meta's (%v)", k.Message, k.Category, sm.Categories())
		}
		if got, ok := sm.KindOf(k.Message); !ok || got.CatalogKey != k.CatalogKey {
			t.Errorf("KindOf(%s) = %+v, %v", k.Message, got, ok)
		}
	}
}

// Keys and periods, as the contract spells them.
func TestKindKeys(t *testing.T) {
	t.Parallel()
	at := time.Date(2027, 1, 1, 15, 4, 5, 0, time.FixedZone("BRT", -3*3600))
	goodbye, _ := sm.KindOf(sm.GoodbyeMessage)
	review, _ := sm.KindOf(sm.WeeklyReviewMessage)
	reminder, _ := sm.KindOf(sm.ReminderMessage)
	for _, tt := range []struct{ got, want string }{
		{goodbye.Key("u", at), "u:goodbye_sent:2027-01-01"},
		{review.Key("u", at), "u:weekly_review:2026-W53"},
		{reminder.Key("u", at), "u:reminder:1798826645000"},
	} {
		if tt.got != tt.want {
			t.Errorf("key %q, want %q", tt.got, tt.want)
		}
	}
	start, end := review.Period.Bounds(at)
	if want := time.Date(2026, 12, 28, 0, 0, 0, 0, time.UTC); !start.Equal(want) || !end.Equal(want.AddDate(0, 0, 7)) {
		t.Errorf("week of %s = [%s, %s), want the week from %s", at, start, end, want)
	}
	if start, end := reminder.Period.Bounds(at); !start.Equal(at) || !end.Equal(at) {
		t.Errorf("an instant's bounds = [%s, %s), want itself", start, end)
	}
	if k, ok := sm.KindFiredBy(sm.Inactivity14d); !ok || k.Message != sm.GoodbyeMessage {
		t.Errorf("KindFiredBy(inactivity_14d) = %s, %v; want the goodbye", k.Message, ok)
	}
	if _, ok := sm.KindFiredBy(sm.UserMessage); ok {
		t.Error("user_message queues a kind")
	}
}

// The goodbye is re-engagement: Meta bills it as marketing (issue 43).
func TestGoodbyeIsMarketing(t *testing.T) {
	t.Parallel()
	if k, _ := sm.KindOf(sm.GoodbyeMessage); k.Category != sm.CategoryMarketing {
		t.Errorf("the goodbye's category is %q, want marketing", k.Category)
	}
	for _, c := range []sm.Category{"", "Marketing", "free"} {
		if c.Valid() {
			t.Errorf("%q is valid, want not", c)
		}
	}
}
