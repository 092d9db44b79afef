package delivery

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// claimWithoutChecksSQL is the claim as it was before the send-time checks
// and quiet hours (issue 17): the reference BenchmarkSendTimeChecks
// measures their cost against. Same columns, every verdict 'claimed'.
const claimWithoutChecksSQL = `
WITH claimed AS (
    UPDATE engagement_message_queue q
       SET status = 'processing', claimed_by = @holder, claimed_until = now() + @claim_timeout::interval
     WHERE q.id IN (
           SELECT id FROM engagement_message_queue
            WHERE status = 'pending' AND scheduled_for <= now()
            ORDER BY scheduled_for
            LIMIT @batch
              FOR UPDATE SKIP LOCKED)
    RETURNING q.*
)
SELECT 'claimed', c.id::text, coalesce(c.user_id::text, ''), coalesce(c.message_type, ''), coalesce(c.message_key, ''),
       c.message_params::text, coalesce(nullif(btrim(p.locale), ''), @default_locale), coalesce(c.destination, ''),
       coalesce(c.destination_jid, ''), coalesce(c.idempotency_key, c.id::text), c.retry_count, c.scheduled_for,
       NULL::bigint, NULL::integer, false, '', false, false
  FROM claimed c
  LEFT JOIN user_profiles p ON p.user_id = c.user_id
 WHERE @timezone::text IS NOT NULL OR @quiet_start::interval IS NULL OR @quiet_end::interval IS NULL
    OR @spend_limit::int IS NULL OR @transport::text IS NULL OR @clock_offset::interval IS NULL
    OR @kinds::text IS NULL OR @kind_priority::text[] IS NULL OR @priority_max_wait::interval IS NULL
    OR @per_user_cap::int IS NULL OR @cap_window::interval IS NULL OR @quality_hold::boolean IS NULL
    OR @paused_keys::text[] IS NULL OR @verdict_recheck::interval IS NULL OR @window_margin::interval IS NULL
    OR @reachout_window::interval IS NULL
 ORDER BY c.scheduled_for, c.id`

// claimWithoutChecks is claimWithoutChecksSQL as a claim statement: its
// parameters numbered as claim.sql's are, in claimQuery, so that it takes
// the claim's arguments (it names every one, and checks none but the
// batch's and the holder's).
func claimWithoutChecks(tb testing.TB) sqlfile.Statement[claimArgs, claimRow, *claimRow] {
	tb.Helper()
	src, err := os.ReadFile("queries/claim.sql")
	if err != nil {
		tb.Fatal(err)
	}
	param := regexp.MustCompile(`@([a-z_]+)`)
	offered := pgx.NamedArgs{}
	for _, m := range param.FindAllStringSubmatch(string(src), -1) {
		offered[m[1]] = m[1]
	}
	// pgx numbers the parameters as make sql did (sqlfile.Generate).
	_, order, err := offered.RewriteQuery(context.Background(), nil, string(src), nil)
	if err != nil {
		tb.Fatal(err)
	}
	number := map[string]string{}
	for i, name := range order {
		number[name.(string)] = "$" + strconv.Itoa(i+1)
	}
	ref := claimQuery
	ref.Name = "claim_without_checks"
	ref.SQL = param.ReplaceAllStringFunc(claimWithoutChecksSQL, func(m string) string {
		n, ok := number[m[1:]]
		if !ok {
			tb.Fatalf("claimWithoutChecksSQL names %s, which claim.sql does not take", m)
		}
		return n
	})
	return ref
}

// BenchmarkSendTimeChecks delivers BENCH_MESSAGES (20,000) weekly reviews,
// one per user, unpaced through a local webhook, with the claim that
// re-checks each user (and computes quiet hours when they are set) and
// with the reference claim that checks nothing, alternating in each round.
// Target (issue 17): the checks cost at most 10% of the throughput.
func BenchmarkSendTimeChecks(b *testing.B) {
	quiet, _ := ParseQuietHours(time.Now().UTC().Add(2*time.Hour).Format("15:04") + "-" + time.Now().UTC().Add(3*time.Hour).Format("15:04"))
	elapsed := benchDelivery(b, []deliveryVariant{
		{name: "no_checks", claim: claimWithoutChecks(b), claimCheckOnly: true},
		{name: "checks", claim: claimQuery},
		{name: "checks_and_quiet_hours", claim: claimQuery, quiet: quiet},
	})
	b.ReportMetric(float64(elapsed[1])/float64(elapsed[0]), "checks_time_ratio")
	b.ReportMetric(float64(elapsed[2])/float64(elapsed[0]), "quiet_hours_time_ratio")
}

// BenchmarkSendBudget delivers BENCH_MESSAGES (20,000) weekly reviews, one
// per user, unpaced through a local webhook, without a send budget and
// with one the messages fit in ten times over (what it costs is the
// budget's upkeep and a stamp per recipient, not waiting for slots),
// alternating which goes first in each round. Target (issue 34): the
// budget costs unpaced delivery at most 5%.
func BenchmarkSendBudget(b *testing.B) {
	n := benchMessages()
	elapsed := benchDelivery(b, []deliveryVariant{
		{name: "no_budget", claim: claimQuery},
		{name: "budget", claim: claimQuery, limit: 10 * n},
	})
	b.ReportMetric(float64(elapsed[1])/float64(elapsed[0]), "budget_time_ratio")
}

// BenchmarkSendPriorityAndCap delivers BENCH_MESSAGES (20,000) weekly
// reviews, one per user, unpaced through a local webhook, plain, with
// --kind-priority goodbye,reminder,weekly_review, with --per-user-cap 1
// (a week; every user gets one message, so none is held: what it costs is
// the count), and with both, the order reversed every other round.
// Target (issue 46): priority and cap cost unpaced delivery at most 5%.
func BenchmarkSendPriorityAndCap(b *testing.B) {
	order := []string{"goodbye", "reminder", "weekly_review"}
	elapsed := benchDelivery(b, []deliveryVariant{
		{name: "plain", claim: claimQuery},
		{name: "priority", claim: claimQuery, kindPriority: order},
		{name: "cap", claim: claimQuery, perUserCap: 1},
		{name: "priority_and_cap", claim: claimQuery, kindPriority: order, perUserCap: 1},
	})
	b.ReportMetric(float64(elapsed[1])/float64(elapsed[0]), "priority_time_ratio")
	b.ReportMetric(float64(elapsed[2])/float64(elapsed[0]), "cap_time_ratio")
	b.ReportMetric(float64(elapsed[3])/float64(elapsed[0]), "priority_and_cap_time_ratio")
}

// BenchmarkSendTimeChecksBeforeTheSend delivers BENCH_MESSAGES (20,000)
// weekly reviews, one per user, unpaced through a local webhook, with the
// claim's checks alone (as before issue 42) and with the checks again
// before the sends as shipped (RecheckAge), alternating the order in each
// round, and reports the second's time against the first's.
func BenchmarkSendTimeChecksBeforeTheSend(b *testing.B) {
	elapsed := benchDelivery(b, []deliveryVariant{
		{name: "claim_check_only", claim: claimQuery, claimCheckOnly: true},
		{name: "recheck", claim: claimQuery},
	})
	b.ReportMetric(float64(elapsed[1])/float64(elapsed[0]), "recheck_time_ratio")
}

// BenchmarkWishes delivers BENCH_MESSAGES (20,000) weekly reviews, one per
// user, unpaced through a local webhook, with the checks before the sends
// as they were before issue 56 (RecheckAge alone: a wish reached a claimed
// batch at its next check, up to a second later) and as shipped (the wishes
// read every WishRefresh while the run sends, a message checked again when
// its user has one), alternating the order in each round, and reports the
// second's time against the first's. Target (issue 56): at most 1.1.
func BenchmarkWishes(b *testing.B) {
	elapsed := benchDelivery(b, []deliveryVariant{
		{name: "recheck_only", claim: claimQuery, noWishes: true},
		{name: "wishes", claim: claimQuery},
	})
	b.ReportMetric(float64(elapsed[1])/float64(elapsed[0]), "wishes_time_ratio")
}

func benchMessages() int {
	if v, err := strconv.Atoi(os.Getenv("BENCH_MESSAGES")); err == nil && v > 0 {
		return v
	}
	return 20_000
}

// deliveryVariant is one way a delivery benchmark delivers: its claim
// statement, quiet hours, send budget (0: none) and check before the sends.
type deliveryVariant struct {
	name  string
	claim sqlfile.Statement[claimArgs, claimRow, *claimRow]
	quiet QuietHours
	limit int
	// claimCheckOnly: no check again before the sends (as before issue 42).
	claimCheckOnly bool
	// noWishes: no reading of the wishes (as before issue 56).
	noWishes bool
	// kindPriority and perUserCap are --kind-priority and --per-user-cap.
	kindPriority []string
	perUserCap   int
}

// benchDelivery queues BENCH_MESSAGES weekly reviews, one per user, and
// delivers them unpaced through a local webhook with each variant in turn,
// in each round (the first variant first in odd rounds, last in even
// ones); it reports each variant's messages/s and returns its time.
func benchDelivery(b *testing.B, variants []deliveryVariant) []time.Duration {
	n := benchMessages()
	pool, _ := pgtest.NewPool(b)
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	hook, err := transport.NewWebhook(transport.WebhookConfig{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	fixture.InactiveUsers(b, pool, n, time.Now())
	elapsed := make([]time.Duration, len(variants))
	round := 0
	for b.Loop() {
		round++
		for k := range variants {
			i := k
			if round%2 == 0 {
				i = len(variants) - 1 - k
			}
			v := variants[i]
			fixture.EmptyDelivery(b, pool)
			fixture.ReviewForEveryUser(b, pool)
			fixture.VacuumQueue(b, pool)
			p, err := NewProcessor(pool, ProcessorConfig{Transport: hook, SendInterval: -1, QuietHours: v.quiet,
				DailyLimit: v.limit, KindPriority: v.kindPriority, PerUserCap: v.perUserCap, Logger: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			p.claimQuery = v.claim
			if v.claimCheckOnly {
				p.recheckAge = -1
			}
			if v.noWishes {
				p.wishAge = -1
			}
			t0 := time.Now()
			sum, err := p.Run(ctx)
			if err != nil {
				b.Fatal(err)
			}
			elapsed[i] += time.Since(t0)
			if sum.Sent != n {
				b.Fatalf("%s: sent %d of %d: %+v", v.name, sum.Sent, n, sum)
			}
		}
	}
	for i, v := range variants {
		b.ReportMetric(float64(n*b.N)/elapsed[i].Seconds(), v.name+"_msgs/s")
	}
	return elapsed
}
