package console_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/pricing"
	"github.com/engagement-scheduler/engagement/scheduler"
	"github.com/engagement-scheduler/engagement/sender"
	sm "github.com/engagement-scheduler/engagement/statemachine"
	"github.com/engagement-scheduler/engagement/status"
)

// The recipe's example (docs/development.md, "Adding a message kind with
// its own time trigger"): dormant users get a "we miss you" 30 days after
// they went dormant.
const (
	dormantWinBack sm.Trigger = "dormant_win_back"
	winBack        sm.Message = "win_back"
	winBackKey                = "engagement.win_back.miss_you"
)

// winBackRecipe carries out the recipe's edits of statemachine/transition.go
// (the trigger, its place in triggers, its row) and statemachine/kind.go
// (the kind's row), as the recipe writes them, on the shipped machine.
func winBackRecipe(t *testing.T) sm.Machine {
	t.Helper()
	m, err := sm.Default.With(sm.Extension{
		Triggers: []sm.Trigger{dormantWinBack},
		Transitions: []sm.Transition{
			{From: sm.Dormant, Trigger: dormantWinBack, To: sm.Dormant, Clock: sm.StateEntered, Wait: 30 * 24 * time.Hour},
		},
		Kinds: []sm.Kind{{
			Message: winBack, CatalogKey: winBackKey, Trigger: dormantWinBack,
			KeyInfix: ":win_back:", Period: sm.PerDay, SendWhile: []sm.State{sm.Dormant},
			Category: sm.CategoryMarketing, Check: "one_win_back_per_day", Plural: "win-backs",
		}},
	})
	if err != nil {
		t.Fatalf("the recipe's rows: %v", err)
	}
	return m
}

// winBackCatalog carries out the recipe's third edit, sender/catalog.json's
// texts in every locale the catalog has, as an operator's catalog file
// laid over the shipped one (queue-process --catalog), and checks each
// renders.
func winBackCatalog(t *testing.T) {
	t.Helper()
	texts := map[string]string{"pt-BR": "Oi! Sentimos sua falta 🙂", "en": "Hi! We miss you 🙂"}
	b, err := json.Marshal(map[string]map[string]string{winBackKey: texts})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	catalog, err := sender.LoadCatalog(path)
	if err != nil {
		t.Fatalf("the catalog with the win-back's texts: %v", err)
	}
	for _, locale := range []string{"pt-BR", "en"} {
		if got, err := catalog.Render(winBackKey, locale, nil); err != nil || got != texts[locale] {
			t.Errorf("the win-back in %s renders %q, %v; want %q", locale, got, err, texts[locale])
		}
	}
}

// Issue 60: the kind recipe, carried out by a test. Its three edits (the
// timer's row, its kind with a Category, its texts) are made in process,
// and the product's own constructors, handed the machine as the binaries
// are handed the shipped one, take the new timer up: the daily job's dry
// run has its step with the users due, the console's forecast page its
// column and its cost at the kind's category, engagementctl status's cost
// its messages, and the real daily run moves the due user and queues the
// kind under its key, leaving the one not due yet alone.
func TestTheKindRecipeAddsATimerTheProductRuns(t *testing.T) {
	t.Parallel()
	machine := winBackRecipe(t)
	winBackCatalog(t)
	pool, _ := pgtest.NewPool(t)
	asOf := time.Now().UTC().Truncate(time.Second)
	const day = 24 * time.Hour
	// Due now (dormant 30 days and an hour), due on the forecast's fourth
	// day, and due after its week.
	dormantSince := func(d time.Duration) string {
		return fixture.User(t, pool, fixture.UserOptions{State: "dormant", LastActivity: asOf.Add(-60 * day),
			StateEnteredAt: fixture.Ptr(asOf.Add(-d))})
	}
	due, later := dormantSince(30*day+time.Hour), dormantSince(27*day-time.Hour)
	dormantSince(20 * day)

	price, ok := pricing.Default().Price(pricing.Default().DefaultCountry, sm.CategoryMarketing)
	if !ok {
		t.Fatal("the shipped prices have no marketing price in their default country")
	}
	checkTheForecastPage(t, serveWith(t, console.Config{Pool: pool, AsOf: func() time.Time { return asOf }, Machine: machine}), price)

	st, err := status.ReadWith(t.Context(), pool, status.Options{AsOf: asOf, Machine: machine})
	if err != nil {
		t.Fatal(err)
	}
	checkWinBackCost(t, "engagementctl status's spend forecast", st.SpendForecast.Forecast, 2, price)

	cfg := scheduler.Config{AsOf: asOf, Machine: machine, Logger: zerolog.New(zerolog.NewTestWriter(t))}
	dry := cfg
	dry.DryRun = true
	checkTheDailyRun(t, "the daily job's dry run", pool, dry, 0)
	checkTheDailyRun(t, "the daily run", pool, cfg, 1)
	kind, _ := machine.KindOf(winBack)
	if n := fixture.CountMessages(t, pool, fixture.Messages{Type: string(winBack), Key: kind.Key(due, asOf), Users: []string{due}}); n != 1 {
		t.Errorf("%d win-backs queued under %s, want 1", n, kind.Key(due, asOf))
	}
	if n := fixture.CountTransitions(t, pool, fixture.Moves{Trigger: string(dormantWinBack), ToState: "dormant"}); n != 1 {
		t.Errorf("%d dormant_win_back moves logged, want the due user's 1", n)
	}
	if n := fixture.CountTransitions(t, pool, fixture.Moves{Users: []string{later}}); n != 0 {
		t.Errorf("the user not due yet was moved %d times", n)
	}
}

// checkTheDailyRun runs the daily job with cfg, as engagement-daily does,
// and checks its last step is the win-back's, moving and queueing one user
// (the dry run: would), with moved win-backs in the queue after it.
func checkTheDailyRun(t *testing.T, what string, pool *pgxpool.Pool, cfg scheduler.Config, queued int) {
	t.Helper()
	sum, err := scheduler.RunDaily(t.Context(), pool, cfg)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	last := sum.Steps[len(sum.Steps)-1]
	if last.Name != string(dormantWinBack) || last.Succeeded != 1 || last.Queued != 1 {
		t.Errorf("%s: its last step is %s, %d moved, %d queued; want dormant_win_back, 1 and 1", what, last.Name, last.Succeeded, last.Queued)
	}
	if n := fixture.CountMessages(t, pool, fixture.Messages{Type: string(winBack)}); n != queued {
		t.Errorf("after %s, %d win-backs in the queue, want %d", what, n, queued)
	}
}

// checkTheForecastPage reads the forecast page, its JSON and its HTML: the
// win-back's column, last, with one user on the first day (overdue) and
// one on the fourth, and two win-backs in the week's cost at marketing's
// price.
func checkTheForecastPage(t *testing.T, srv *httptest.Server, price int64) {
	t.Helper()
	_, body := get(t, srv, "/forecast", viewer, viewerPassword, true)
	var f struct {
		Timers []console.ForecastTimer `json:"timers"`
		Days   []struct {
			Moves map[string]int64 `json:"moves"`
		} `json:"days"`
		Cost pricing.Forecast `json:"cost"`
	}
	decode(t, body, &f)
	want := console.ForecastTimer{Trigger: string(dormantWinBack), Kind: string(winBack), Label: "win-backs"}
	if len(f.Timers) == 0 || f.Timers[len(f.Timers)-1] != want {
		t.Errorf("the forecast's timers are %+v, want the win-back's last: %+v", f.Timers, want)
	}
	var byDay []int64
	for _, d := range f.Days {
		byDay = append(byDay, d.Moves[string(dormantWinBack)])
	}
	if !slices.Equal(byDay, []int64{1, 0, 0, 1, 0, 0, 0}) {
		t.Errorf("the forecast's win-backs by day are %v, want the overdue user on day 1 and the other on day 4", byDay)
	}
	checkWinBackCost(t, "the forecast page", f.Cost, 2, price)
	_, page := get(t, srv, "/forecast", viewer, viewerPassword, false)
	for _, w := range []string{"<th>win-backs</th>", "win_back messages: 2 (marketing"} {
		if !strings.Contains(page, w) {
			t.Errorf("the forecast page lacks %q", w)
		}
	}
}

// checkWinBackCost checks the forecast f costs want win-backs as
// marketing, at price each.
func checkWinBackCost(t *testing.T, what string, f pricing.Forecast, want, price int64) {
	t.Helper()
	for _, k := range f.Kinds {
		if k.Kind != winBack {
			continue
		}
		if k.Messages != want || k.Category != sm.CategoryMarketing || k.USD == nil || *k.USD != pricing.USD(price*want) {
			t.Errorf("%s: the win-backs are %+v, want %d as marketing at %v", what, k, want, pricing.USD(price*want))
		}
		if !strings.Contains(f.Assumption, "every win_back delivered and billed as marketing") {
			t.Errorf("%s: the assumption %q does not name the win-back", what, f.Assumption)
		}
		return
	}
	t.Errorf("%s: no win-backs in the cost %+v", what, f.Kinds)
}
