package funnel_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/funnel"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// near reports whether got rounds to want at 3 decimals.
func near(got, want float64) bool { return math.Abs(got-want) < 0.0005 }

// Newcombe's own worked examples (Newcombe 1998, Statistics in Medicine
// 17:873–890, Table II, method 10): 56/70 − 48/80 and 9/10 − 3/10.
func TestNewcombeMatchesThePaper(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		x1, n1, x2, n2 int64
		d, lo, hi      float64
	}{
		{56, 70, 48, 80, 0.2000, 0.0524, 0.3339},
		{9, 10, 3, 10, 0.6000, 0.1705, 0.8090},
	} {
		d, lo, hi := funnel.Newcombe(c.x1, c.n1, c.x2, c.n2, funnel.Z95)
		if math.Abs(d-c.d) > 5e-5 || math.Abs(lo-c.lo) > 5e-5 || math.Abs(hi-c.hi) > 5e-5 {
			t.Errorf("%d/%d − %d/%d: %.4f (%.4f, %.4f), the paper says %.4f (%.4f, %.4f)",
				c.x1, c.n1, c.x2, c.n2, d, lo, hi, c.d, c.lo, c.hi)
		}
	}
}

// The minimal sample of docs/holdout.md: a 3-point lift over 10 % with 80 %
// power at 5 %, two-sided. With equal arms the textbook figure is 1,774 a
// side; with a 10 % holdout (9 treated per held-out user), 1,019 held out
// and 9,171 treated, 10,190 goodbyes.
func TestSampleSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		base, ratio        float64
		treatment, holdout int64
	}{
		{0.10, 1, 1774, 1774},
		{0.10, 9, 9171, 1019},
		{0.05, 9, 5616, 624},
		{0.20, 9, 14940, 1660},
	} {
		tr, ho := funnel.SampleSize(c.base, funnel.DetectableLift, c.ratio)
		if tr != c.treatment || ho != c.holdout {
			t.Errorf("base %.2f, %g treated per held out: %d and %d, want %d and %d", c.base, c.ratio, tr, ho, c.treatment, c.holdout)
		}
	}
}

// history scripts goodbyes and returns in the log: for each, n users of
// the arm whose goodbye is logged at at, back of them writing again after
// back (0: never).
type history struct {
	t       *testing.T
	db      postgres.Querier
	back    []fixture.LoggedMove // the returns scripted, logged by returns
	variant *string              // the treated goodbyes' copy variant, nil: none
}

// goodbyeMove is user's goodbye logged at at, held out or not.
func goodbyeMove(user string, holdout bool, at time.Time) fixture.LoggedMove {
	return fixture.LoggedMove{User: user, From: "active", To: "goodbye_sent", Trigger: "inactivity_14d", Holdout: holdout, At: at}
}

// returnMove is user's return, a message at at.
func returnMove(user string, at time.Time) fixture.LoggedMove {
	return fixture.LoggedMove{User: user, From: "goodbye_sent", To: "active", Trigger: "user_message", At: at}
}

func (h *history) goodbyes(at time.Time, holdout bool, n int, returns map[time.Duration]int) []string {
	h.t.Helper()
	users := make([]string, n)
	moves := make([]fixture.LoggedMove, n)
	for i := range users {
		users[i] = fixture.NewID()
		moves[i] = goodbyeMove(users[i], holdout, at)
		if h.variant != nil {
			moves[i].Variant = *h.variant
		}
	}
	fixture.LogMoves(h.t, h.db, moves)
	i := 0
	for after, k := range returns {
		for _, u := range users[i : i+k] {
			h.back = append(h.back, returnMove(u, at.Add(after)))
		}
		i += k
	}
	return users
}

// returns logs the returns scripted so far, in one statement.
func (h *history) returns() {
	h.t.Helper()
	fixture.LogMoves(h.t, h.db, h.back)
	h.back = nil
}

func (h *history) comeback(user string, at time.Time) {
	h.t.Helper()
	fixture.LogMoves(h.t, h.db, []fixture.LoggedMove{returnMove(user, at)})
}

// Issue 45: the funnel's arithmetic against a history whose answer is
// worked out here by hand. As of Sunday 2026-11-22 06:00 UTC, 8 weeks
// (from the week of 2026-09-28):
//
//	week of 10-05 (closed): treated 40, 10 back within 5 days, 2 more after 31 days (too late);
//	                        one of the 40 has a second goodbye 2 days later (counted once);
//	                        held out 10, 1 back after 29 days
//	week of 10-12 (closed): treated 60, 24 back after 10 days (copy variant a: 30, 15 back;
//	                        b: 30, 9 back); held out 20, 2 back within the hour,
//	                        and one who wrote the day before the goodbye (not a return)
//	week of 11-09 (open):   treated 5, 1 back; held out 2: still counting, not pooled
//	2026-09-01:             a goodbye before the window, not counted
//
// Rates: 10/40 = 0.250 and 1/10 = 0.100; 24/60 = 0.400 and 2/20 = 0.100;
// pooled 34/100 = 0.340 and 3/30 = 0.100, difference 0.240.
// Wilson 95 % bounds, z = 1.96: 34/100 → (0.2546, 0.4372), 3/30 → (0.0346,
// 0.2562). Newcombe's interval:
//
//	low  = 0.240 − √((0.340 − 0.2546)² + (0.2562 − 0.100)²) = 0.240 − √(0.00729 + 0.02440) = 0.240 − 0.1780 = 0.062
//	high = 0.240 + √((0.4372 − 0.340)² + (0.100 − 0.0346)²) = 0.240 + √(0.00945 + 0.00428) = 0.240 + 0.1172 = 0.357
//
// and the same way 0.150 (−0.173, 0.323) for the first week, 0.300
// (0.069, 0.445) for the second. The pooled interval excludes zero: the
// goodbye brings users back; the first week alone cannot tell. By variant,
// pooled against the same 3/30: the one text (first week) 10/40, 0.150
// (−0.040, 0.315); a 15/30, 0.400 (0.170, 0.581); b 9/30, 0.200 (−0.005,
// 0.390): variant a's interval excludes zero, b's does not, yet.
func TestFunnelArithmeticOnAScriptedHistory(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	h := &history{t: t, db: tx}
	day := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	const d = 24 * time.Hour

	h.goodbyes(day("2026-09-01T10:00:00Z"), false, 3, map[time.Duration]int{d: 3})
	a := h.goodbyes(day("2026-10-06T10:00:00Z"), false, 40, map[time.Duration]int{5 * d: 10, 31 * d: 2})
	fixture.LogMoves(t, tx, []fixture.LoggedMove{goodbyeMove(a[0], false, day("2026-10-08T10:00:00Z"))})
	h.goodbyes(day("2026-10-06T11:00:00Z"), true, 10, map[time.Duration]int{29 * d: 1})
	h.variant = fixture.Ptr("a")
	h.goodbyes(day("2026-10-13T10:00:00Z"), false, 30, map[time.Duration]int{10 * d: 15})
	h.variant = fixture.Ptr("b")
	h.goodbyes(day("2026-10-13T10:00:00Z"), false, 30, map[time.Duration]int{10 * d: 9})
	h.variant = nil
	b := h.goodbyes(day("2026-10-13T10:00:00Z"), true, 20, map[time.Duration]int{time.Hour: 2})
	h.goodbyes(day("2026-11-10T10:00:00Z"), false, 5, map[time.Duration]int{2 * d: 1})
	h.goodbyes(day("2026-11-10T10:00:00Z"), true, 2, nil)
	h.returns()
	// A message the day before the goodbye is no return (logged after it,
	// with a later id, but earlier in time).
	h.comeback(b[19], day("2026-10-12T10:00:00Z"))

	rep, err := funnel.Read(context.Background(), tx, funnel.Options{AsOf: day("2026-11-22T06:00:00Z"), Weeks: 8})
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		week                      string
		open                      bool
		tn, tr, hn, hr            int64
		rate, hrate, diff, lo, hi float64
		verdict                   string
	}
	wants := []want{
		{"2026-10-05", false, 40, 10, 10, 1, 0.250, 0.100, 0.150, -0.173, 0.323, "not enough users yet to tell"},
		{"2026-10-12", false, 60, 24, 20, 2, 0.400, 0.100, 0.300, 0.069, 0.445, "the goodbye brings users back"},
		{"2026-11-09", true, 5, 1, 2, 0, 0.200, 0, 0.200, -0.478, 0.624, "still counting"},
	}
	if len(rep.Cohorts) != len(wants) {
		t.Fatalf("cohorts %+v, want %d", rep.Cohorts, len(wants))
	}
	for i, w := range wants {
		c := rep.Cohorts[i]
		got := fmt.Sprintf("%s open=%v %d/%d %d/%d", c.WeekStart.Format(time.DateOnly), c.StillCounting,
			c.Treatment.Reactivated, c.Treatment.Users, c.Holdout.Reactivated, c.Holdout.Users)
		if exp := fmt.Sprintf("%s open=%v %d/%d %d/%d", w.week, w.open, w.tr, w.tn, w.hr, w.hn); got != exp {
			t.Errorf("cohort %d: %s, want %s", i, got, exp)
		}
		if !near(c.Treatment.Rate, w.rate) || !near(c.Holdout.Rate, w.hrate) || !near(c.Lift.Difference, w.diff) ||
			!near(c.Lift.Low, w.lo) || !near(c.Lift.High, w.hi) {
			t.Errorf("cohort %s: rates %.3f %.3f, difference %.3f (%.3f, %.3f); want %.3f %.3f, %.3f (%.3f, %.3f)", w.week,
				c.Treatment.Rate, c.Holdout.Rate, c.Lift.Difference, c.Lift.Low, c.Lift.High, w.rate, w.hrate, w.diff, w.lo, w.hi)
		}
		if !strings.HasPrefix(c.Lift.Verdict, w.verdict) {
			t.Errorf("cohort %s: verdict %q, want it to start %q", w.week, c.Lift.Verdict, w.verdict)
		}
	}
	if rep.PooledCohorts != 2 || rep.StillCounting != 7 || rep.Treatment.Users != 100 || rep.Treatment.Reactivated != 34 ||
		rep.Holdout.Users != 30 || rep.Holdout.Reactivated != 3 {
		t.Errorf("totals: %d cohorts pooled, %d still counting, treated %+v, held out %+v; want 2, 7, 34/100, 3/30",
			rep.PooledCohorts, rep.StillCounting, rep.Treatment, rep.Holdout)
	}
	if l := rep.Lift; !near(rep.Treatment.Rate, 0.340) || !near(rep.Holdout.Rate, 0.100) || !near(l.Difference, 0.240) ||
		!near(l.Low, 0.062) || !near(l.High, 0.357) || !strings.HasPrefix(l.Verdict, "the goodbye brings users back: +24.0 points (95 % CI +6.2 to +35.7)") {
		t.Errorf("pooled: %.3f vs %.3f, %+v; want 0.340 vs 0.100, 0.240 (0.062, 0.357) and the goodbye bringing users back",
			rep.Treatment.Rate, rep.Holdout.Rate, l)
	}
	wantVariants := []struct {
		name         string
		users, back  int64
		diff, lo, hi float64
	}{{"", 40, 10, 0.150, -0.040, 0.315}, {"a", 30, 15, 0.400, 0.170, 0.581}, {"b", 30, 9, 0.200, -0.005, 0.390}}
	if len(rep.Variants) != len(wantVariants) {
		t.Fatalf("pooled variants %+v, want %d", rep.Variants, len(wantVariants))
	}
	for i, w := range wantVariants {
		v := rep.Variants[i]
		if v.Name != w.name || v.Users != w.users || v.Reactivated != w.back || !near(v.Lift.Difference, w.diff) ||
			!near(v.Lift.Low, w.lo) || !near(v.Lift.High, w.hi) {
			t.Errorf("variant %d: %q %d/%d, %.3f (%.3f, %.3f); want %q %d/%d, %.3f (%.3f, %.3f)", i, v.Name, v.Reactivated, v.Users,
				v.Lift.Difference, v.Lift.Low, v.Lift.High, w.name, w.back, w.users, w.diff, w.lo, w.hi)
		}
	}
	if vs := rep.Cohorts[1].Variants; len(vs) != 2 || vs[0].Name != "a" || vs[0].Users != 30 || vs[1].Name != "b" || vs[1].Reactivated != 9 {
		t.Errorf("the second week's variants: %+v, want a 15/30 and b 9/30", vs)
	}
}

// The verdict until it can tell, and when it can tell that there is no
// lift worth having: nobody held out; too few users; enough users (more
// than SampleSize asks at 10 %) with an interval around zero.
func TestFunnelVerdicts(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	h := &history{t: t, db: tx}
	at, _ := time.Parse(time.RFC3339, "2026-09-08T10:00:00Z")
	asOf := at.Add(60 * 24 * time.Hour)
	read := func() *funnel.Report {
		t.Helper()
		rep, err := funnel.Read(context.Background(), tx, funnel.Options{AsOf: asOf, Weeks: 12})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	h.goodbyes(at, false, 50, map[time.Duration]int{time.Hour: 5})
	if v := read().Lift.Verdict; v != "not enough users yet to tell: nobody held out (engagement-daily --holdout-percent)" {
		t.Errorf("without a holdout: %q", v)
	}
	h.goodbyes(at, true, 6, map[time.Duration]int{time.Hour: 1})
	h.returns()
	if v := read().Lift.Verdict; !strings.HasPrefix(v, "not enough users yet to tell: -6.7 points") {
		t.Errorf("50 treated and 6 held out: %q", v)
	}
	fixture.FunnelForgetMoves(t, tx)
	// 10,000 treated and 1,200 held out at 10 % each: enough for 3 points,
	// every tenth of each arm (in user_id order) back an hour later.
	arms := map[bool][]string{}
	var goodbyes []fixture.LoggedMove
	for i := range 11200 {
		u, holdout := fixture.NewID(), i >= 10000
		arms[holdout] = append(arms[holdout], u)
		goodbyes = append(goodbyes, goodbyeMove(u, holdout, at))
	}
	fixture.LogMoves(t, tx, goodbyes)
	var back []fixture.LoggedMove
	for _, users := range arms {
		slices.Sort(users) // a UUID's order is its lower-case text's
		for r := 10; r <= len(users); r += 10 {
			back = append(back, returnMove(users[r-1], at.Add(time.Hour)))
		}
	}
	fixture.LogMoves(t, tx, back)
	rep := read()
	if v := rep.Lift.Verdict; !strings.HasPrefix(v, "no lift of 3 points or more: the goodbye makes no clear difference") {
		t.Errorf("10,000 and 1,200 at 10 %% each: %q (needed %d and %d)", v, rep.Lift.NeededTreatment, rep.Lift.NeededHoldout)
	}
}

// The demo's console (issue 61) said "nobody held out
// (engagement-daily --holdout-percent)" under a week that held 4 users
// out: its 30 days were not over, so nothing was pooled. While every week
// with both arms is still counting, the pooled verdicts say so, the
// holdout's and the timing's alike.
func TestPooledVerdictWhileEveryWeekIsStillCounting(t *testing.T) {
	t.Parallel()
	tx := pgtest.NewTx(t)
	at, _ := time.Parse(time.RFC3339, "2026-11-24T06:00:00Z")
	moves := make([]fixture.LoggedMove, 40)
	for i := range moves { // i+1 as generate_series(1, 40) numbers them
		moves[i] = goodbyeMove(fixture.NewID(), (i+1)%5 == 0, at)
		moves[i].Timing = map[bool]string{true: "best_hour", false: "run_time"}[(i+1)%2 == 0]
	}
	fixture.LogMoves(t, tx, moves)
	rep, err := funnel.Read(context.Background(), tx, funnel.Options{AsOf: at.Add(2 * 24 * time.Hour), Weeks: 8})
	if err != nil {
		t.Fatal(err)
	}
	want := "not enough users yet to tell: no week with both arms has closed its 30 days yet (still counting)"
	if rep.Lift.Verdict != want {
		t.Errorf("the holdout's pooled verdict: %q, want %q", rep.Lift.Verdict, want)
	}
	if rep.Timing == nil || rep.Timing.Lift.Verdict != want || rep.Timing.AnsweredLift.Verdict != want {
		t.Errorf("the timing's pooled verdicts: %+v, want %q", rep.Timing, want)
	}
}
