package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// budgetWaiting is how many messages seedBudget puts in the send budget's
// line.
const budgetWaiting = 25

// seedBudget makes the send budgets a queue-process with --daily-limit
// leaves, on the database's clock (the budget is read live):
//
//   - webhook, 10 a day, full: 10 recipients claimed 100 to 10 minutes
//     ago, so the next slot frees in 22 h 20 min;
//   - whatsapp, 1000 a day on the ramp 250,2 started 30 hours ago: day 2,
//     500 today, 37 recipients in the window;
//
// and budgetWaiting reminders to users (in turn) waiting on the budget,
// each where the claim puts it: the n-th when the n-th slot frees, a turn
// of the window later past the limit. The last goes 71 hours from now.
func seedBudget(t *testing.T, pool *pgxpool.Pool, users []string) {
	t.Helper()
	now := fixture.Now(t, pool)
	fixture.Budget(t, pool, "webhook", 10, 10)
	for i := range 10 {
		fixture.SpentOn(t, pool, "webhook", fixture.NewID(), now.Add(-100*time.Minute+time.Duration(i)*10*time.Minute))
	}
	fixture.ConsoleRampBudget(t, pool, fixture.ConsoleRamp{Transport: "whatsapp", DailyLimit: 1000, Start: 250, Factor: 2,
		StartedAt: now.Add(-30 * time.Hour), Used: 37})
	for i := 1; i <= 37; i++ {
		fixture.SpentOn(t, pool, "whatsapp", fixture.NewID(), now.Add(-time.Duration(i)*3*time.Minute))
	}
	for j := range budgetWaiting {
		fixture.Queue(t, pool, fixture.Message{User: users[j%len(users)], Type: "reminder", CatalogKey: "engagement.reminder.come_back",
			JID: fmt.Sprintf("55119%08d@s.whatsapp.net", j), DeferredReason: "budget",
			ScheduledFor: now.Add(-100*time.Minute + time.Duration(j%10)*10*time.Minute + time.Duration(1+j/10)*24*time.Hour +
				time.Duration(j)*time.Microsecond)})
	}
}

func TestTheSendBudgetOnTheQueueAndForecastPages(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	now := time.Now()
	var users []string
	for range 3 {
		users = append(users, fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: now.Add(-20 * 24 * time.Hour),
			RemindAt: fixture.Ptr(now.Add(24 * time.Hour))}))
	}

	// Without a budget the pages say so, and the JSON has none.
	srv := serve(t, pool, now)
	var q console.Queue
	_, body := get(t, srv, "/queue", viewer, viewerPassword, true)
	decode(t, body, &q)
	if q.Budgets == nil || len(q.Budgets) != 0 || !strings.Contains(body, `"budgets":[]`) {
		t.Errorf("queue JSON without a budget: budgets %+v (%.300s), want []", q.Budgets, body)
	}
	for _, p := range []string{"/queue", "/forecast"} {
		if _, body := get(t, srv, p, viewer, viewerPassword, false); !strings.Contains(body, "No send budget: queue-process runs without <code>--daily-limit</code>; nothing is held by one.") {
			t.Errorf("%s without a budget does not say there is none", p)
		}
	}

	seedBudget(t, pool, users)
	// One held by quiet hours and one waiting for a retry, to check the
	// pending messages are each counted once, by why they wait.
	dbNow := fixture.Now(t, pool)
	fixture.Queue(t, pool, fixture.Message{User: users[0], Type: "reminder", CatalogKey: "engagement.reminder.come_back",
		JID: "5511900000001@s.whatsapp.net", ScheduledFor: dbNow.Add(8 * time.Hour), DeferredReason: "quiet_hours"})
	fixture.Queue(t, pool, fixture.Message{User: users[0], Type: "reminder", CatalogKey: "engagement.reminder.come_back",
		JID: "5511900000002@s.whatsapp.net", ScheduledFor: dbNow.Add(5 * time.Minute), RetryCount: 1})

	srv = serve(t, pool, now) // a new console: the first one's snapshots predate the budget
	q = console.Queue{}
	_, body = get(t, srv, "/queue", viewer, viewerPassword, true)
	decode(t, body, &q)
	if p := q.Pending; p.Budget != budgetWaiting || p.QuietHours != 1 || p.Retrying != 1 || p.Later != budgetWaiting+2 {
		t.Errorf("pending: %+v, want %d waiting on the budget, 1 held by quiet hours, 1 retrying, %d later",
			p, budgetWaiting, budgetWaiting+2)
	}
	if len(q.Budgets) != 2 {
		t.Fatalf("queue JSON: budgets %+v, want webhook and whatsapp", q.Budgets)
	}
	hook, wa := q.Budgets[0], q.Budgets[1]
	if hook.Transport != "webhook" || hook.Limit != 10 || hook.Used != 10 || hook.Waiting != budgetWaiting ||
		hook.RampDay != nil || hook.NextSlotAt == nil || hook.NextSlotIn != "in 22 h 20 min" ||
		hook.ClearsAt == nil || hook.ClearsIn != "in 3 days" {
		t.Errorf("webhook's budget: %+v, want 10/10 full, the next slot in 22 h 20 min, %d waiting clearing in 3 days", hook, budgetWaiting)
	}
	if wa.Transport != "whatsapp" || wa.DailyLimit != 1000 || wa.Ramp != "250,2" || wa.RampDay == nil || *wa.RampDay != 1 ||
		wa.Limit != 500 || wa.Used != 37 || wa.NextSlotAt != nil || wa.NextSlotIn != "" {
		t.Errorf("whatsapp's budget: %+v, want day 1 (the second) of the ramp 250,2: 37 of 500, not full", wa)
	}
	for _, key := range []string{`"budgets":[{"transport":"webhook","daily_limit":10,`, `"waiting_on_budget":25`, `"clears_in":"in 3 days"`} {
		if !strings.Contains(body, key) {
			t.Errorf("queue JSON lacks %s: %.600s", key, body)
		}
	}

	_, body = get(t, srv, "/queue", viewer, viewerPassword, false)
	for _, want := range []string{
		`<span class="label">waiting on the send budget</span><span class="value">25</span>`,
		`<td>webhook</td>`, `<td class="text">10 a day</td>`,
		`<meter min="0" max="10" value="10"`, `10 / 10`, `<td>25</td>`,
		`<span class="full">full</span>: the next frees at `, `(in 22 h 20 min)`,
		`the last waiting message goes at `, `(in 3 days)`,
		`<td class="text">500 today, day 2 of the ramp 250,2 up to 1` + "\u202f" + `000</td>`,
		`37 / 500`, `463 free now`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the queue page lacks %q", want)
		}
	}
	if strings.Contains(body, "No send budget") {
		t.Error("the queue page says there is no send budget")
	}

	var f struct { // console.Forecast's days' steps do not read back from JSON
		Budgets []console.Budget `json:"budgets"`
	}
	_, body = get(t, srv, "/forecast", viewer, viewerPassword, true)
	decode(t, body, &f)
	if len(f.Budgets) != 2 || f.Budgets[0].Waiting != budgetWaiting || f.Budgets[0].ClearsIn != "in 3 days" {
		t.Errorf("forecast JSON: budgets %+v, want webhook's %d waiting, clearing in 3 days", f.Budgets, budgetWaiting)
	}
	_, body = get(t, srv, "/forecast", viewer, viewerPassword, false)
	clears := f.Budgets[0].ClearsAt.UTC().Format("2006-01-02 15:04 UTC")
	for _, want := range []string{
		`25 messages wait on the send budget of <strong>webhook</strong> (10 a day): the last goes at ` + clears + ` (in 3 days).`,
		`25 messages wait on the send budget of <strong>whatsapp</strong> (500 today, day 2 of the ramp 250,2 up to 1` + "\u202f" + `000)`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the forecast page lacks %q", want)
		}
	}
}
