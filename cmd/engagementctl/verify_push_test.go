package main_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pushtest"
	"github.com/engagement-scheduler/engagement/pricing"
	"github.com/engagement-scheduler/engagement/verify"
)

// verify --pushgateway-url pushes its outcome for the "verify broken"
// alert: a broken invariant is a completed run with engagement_verify_ok 0
// and the check's violations; a repaired database pushes 1.
func TestVerifyPushesItsOutcome(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	pool, url := pgtest.NewPool(t)
	user := fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: time.Now().Add(-time.Hour)})
	env := cmdtest.Env("DATABASE_URL="+url, "PUSHGATEWAY_URL="+gw.URL)

	res := cmdtest.Exec(t, ctl.NewCommand, env, "verify", "--output", "json")
	if res.Code != 4 {
		t.Fatalf("verify with remind_later without remind_at: exit %d, want 4\n%s", res.Code, res.Stderr)
	}
	got := gw.Metrics(t, "engagement_")
	job := []string{"job", metrics.VerifyJob}
	if v, ok := got.Value(metrics.VerifyOK, job...); !ok || v != 0 {
		t.Errorf("%s = %v (found %v), want 0; the gateway has:\n%s", metrics.VerifyOK, v, ok, got)
	}
	if v, ok := got.Value(metrics.VerifyViolations, append(job, "check", verify.CheckStateTimestamps)...); !ok || v != 1 {
		t.Errorf("%s{check=%q} = %v (found %v), want 1", metrics.VerifyViolations, verify.CheckStateTimestamps, v, ok)
	}
	if v, ok := got.Value(metrics.JobLastRunFailed, job...); !ok || v != 0 {
		t.Errorf("%s = %v (found %v), want 0: verify ran, it found a broken invariant", metrics.JobLastRunFailed, v, ok)
	}

	fixture.SetState(t, pool, user, fixture.StateChange{RemindAt: fixture.Now(t, pool)})
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "verify"); res.Code != 0 {
		t.Fatalf("verify after the repair: exit %d\n%s", res.Code, res.Stderr)
	}
	got = gw.Metrics(t, "engagement_")
	if v, ok := got.Value(metrics.VerifyOK, job...); !ok || v != 1 {
		t.Errorf("after the repair %s = %v (found %v), want 1", metrics.VerifyOK, v, ok)
	}
	if v, ok := got.Value(metrics.VerifyViolations, append(job, "check", verify.CheckStateTimestamps)...); !ok || v != 0 {
		t.Errorf("after the repair %s{check=%q} = %v (found %v), want 0", metrics.VerifyViolations, verify.CheckStateTimestamps, v, ok)
	}
}

// Issue 43: the spend rides on verify's push: engagement_spend_usd and
// engagement_spend_billable_messages by Meta's pricing category, for the
// messages the Cloud API accepted in the last 30 days and Meta billed
// (delivered), at the shipped prices.
func TestVerifyPushesTheSpend(t *testing.T) {
	t.Parallel()
	gw := pushtest.New(t)
	pool, url := pgtest.NewPool(t)
	for g := range 3 {
		user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
		// Sent through the Cloud API (the send ledger's row) and delivered.
		fixture.CtlDeliveredSends(t, pool, fixture.DeliveredSends{User: user, Type: "weekly_review",
			CatalogKey: "engagement.weekly_review.celebration", N: 1, JIDPrefix: fmt.Sprintf("55119000000%d", g), KeySuffix: "w",
			Ago: 48 * time.Hour, Transport: pricing.MetaTransport})
	}
	env := cmdtest.Env("DATABASE_URL="+url, "PUSHGATEWAY_URL="+gw.URL)
	if res := cmdtest.Exec(t, ctl.NewCommand, env, "verify"); res.Code != 0 {
		t.Fatalf("verify: exit %d\n%s", res.Code, res.Stderr)
	}
	got := gw.Metrics(t, "engagement_")
	labels := []string{"job", metrics.VerifyJob, "category", "marketing"}
	if v, ok := got.Value(metrics.SpendBillable, labels...); !ok || v != 3 {
		t.Errorf("%s{marketing} = %v (found %v), want 3; the gateway has:\n%s", metrics.SpendBillable, v, ok, got)
	}
	if v, ok := got.Value(metrics.SpendUSD, labels...); !ok || v < 0.1874 || v > 0.1876 {
		t.Errorf("%s{marketing} = %v (found %v), want 3 × 0.0625", metrics.SpendUSD, v, ok)
	}
}
