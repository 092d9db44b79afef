// Package metrics turns what one run of a batch binary did into Prometheus
// metrics and pushes them to a Pushgateway, the standard for batch jobs
// that are gone before anything could scrape them.
//
// Every run builds a fresh registry: the metrics are gauges holding that
// run's values, and the Pushgateway group (grouping label job = the binary;
// shard = "k/n" for a sharded run) holds the last run's. The metrics carry no
// job or shard label of their own: the Pushgateway adds the group's.
//
//	engagement_job_duration_seconds                    run-level: the whole run, queue step included
//	engagement_job_last_success_timestamp_seconds      run-level: end of the last run that completed (exit 0 or 3)
//	engagement_job_last_failure_timestamp_seconds      run-level: end of the last run, present only while it failed (exit 1)
//	engagement_job_last_run_failed                     run-level: 1 when the last run failed, else 0
//	engagement_job_last_stopped_timestamp_seconds      run-level: end of the last run, present only while it was told to stop (SIGTERM) before its work was done
//	engagement_job_users{step,outcome}                 outcome succeeded | failed | skipped (they partition the users a step considered)
//	engagement_job_users_processed{step}               users acted on: succeeded + failed
//	engagement_job_messages{step,result}               result queued | duplicates (new queue rows, inserts that hit an existing key)
//	engagement_delivery_messages{transport,result}     result sent | retried | failed (queue-process, or the jobs' queue step)
//	engagement_delivery_cancelled_messages{transport,reason}  no longer wanted when claimed or just before the send: opted_out | stale | no_user
//	engagement_delivery_deferred_messages{transport}   due inside the quiet hours, left pending
//	engagement_delivery_invalid_messages{transport}    failed because they could not be rendered
//	engagement_delivery_recovered_messages{transport}  abandoned claims the run settled
//	engagement_delivery_released_messages{transport}   claimed messages handed back unsent (a stop, an outage), retries unspent
//	engagement_delivery_outage{transport}              1 when the run stopped because the receiver was down, else 0
//	engagement_delivery_claims_left{transport}         messages still claimed when the run ended (the database did not answer)
//	engagement_queue_pending_messages                  queue-process: pending messages after the run, due or not
//	engagement_queue_due_messages                      queue-process: pending messages already due after the run
//	engagement_queue_oldest_due_age_seconds            queue-process: how long the oldest due message has waited (0: none)
//	engagement_verify_ok                               engagementctl verify: 1 when every invariant held, else 0
//	engagement_verify_violations{check}                engagementctl verify: violations per check
//
// engagementctl verify --pushgateway-url pushes under job "engagementctl-verify",
// with the run-level metrics (a verify that found a broken invariant
// completed; one that could not check failed). deploy/prometheus/alerts.yml
// holds the alerting rules over these metrics.
//
// A run that completed replaces its group (HTTP PUT): the group is exactly
// that run. A run that failed adds only the run-level failure metrics to it
// (HTTP POST), so the last success's timestamp and counters survive for the
// alert `time() - engagement_job_last_success_timestamp_seconds > …`. A job
// run told to stop (SIGTERM) before its work was done is no failure
// (engagement_job_last_run_failed 0) and no success either: it adds the
// run-level metrics and its stop's timestamp (POST), and the last success
// stays, so a job stopped day after day still trips the no-recent-success
// alerts.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"

	"github.com/engagement-scheduler/engagement"
	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Metric names, the documented contract of the dashboards and alerts.
const (
	JobDuration          = "engagement_job_duration_seconds"
	JobLastSuccess       = "engagement_job_last_success_timestamp_seconds"
	JobLastFailure       = "engagement_job_last_failure_timestamp_seconds"
	JobLastRunFailed     = "engagement_job_last_run_failed"
	JobLastStopped       = "engagement_job_last_stopped_timestamp_seconds"
	JobUsers             = "engagement_job_users"
	JobUsersProcessed    = "engagement_job_users_processed"
	JobMessages          = "engagement_job_messages"
	DeliveryMessages     = "engagement_delivery_messages"
	DeliveryRecovered    = "engagement_delivery_recovered_messages"
	DeliveryCancelled    = "engagement_delivery_cancelled_messages"
	DeliveryDeferred     = "engagement_delivery_deferred_messages"
	DeliveryInvalid      = "engagement_delivery_invalid_messages"
	DeliveryReleased     = "engagement_delivery_released_messages"
	DeliveryOutage       = "engagement_delivery_outage"
	TransportPaused      = "engagement_transport_paused"
	DeliveryClaimsLeft   = "engagement_delivery_claims_left"
	DeliveryDeduplicated = "engagement_delivery_deduplicated_messages"
	DedupeChecks         = "engagement_dedupe_checks"
	DedupeCheckErrors    = "engagement_dedupe_check_errors"
	DedupeCheckSeconds   = "engagement_dedupe_check_seconds"
	BudgetDeferred       = "engagement_delivery_budget_deferred_messages"
	BudgetLimit          = "engagement_send_budget_limit"
	BudgetUsed           = "engagement_send_budget_used"
	BudgetWaiting        = "engagement_send_budget_waiting_messages"
	QueuePending         = "engagement_queue_pending_messages"
	QueueDue             = "engagement_queue_due_messages"
	QueueOldestDueAge    = "engagement_queue_oldest_due_age_seconds"
	VerifyOK             = "engagement_verify_ok"
	VerifyViolations     = "engagement_verify_violations"
	SpendUSD             = "engagement_spend_usd"
	SpendBillable        = "engagement_spend_billable_messages"
	DefaultPushTimeout   = 10 * time.Second
)

// VerifyJob is the Pushgateway job engagementctl verify pushes under.
const VerifyJob = "engagementctl-verify"

// Run is one run of a binary: what gets pushed.
type Run struct {
	Job   string // the binary: the Pushgateway's job grouping label
	Shard string // "k/n" for a sharded run: a shard grouping label; "" for none
	// Environment is the environment grouping label ("production"; "" for
	// none), so that environments sharing a Pushgateway do not overwrite
	// each other's groups.
	Environment string
	Duration    time.Duration // the whole run
	End         time.Time     // when it ended: the value of the timestamp metrics
	// Failed says the run ended fatally (exit 1): only the run-level
	// failure metrics are pushed, and the last success is kept.
	Failed bool
	// Stopped says a job's run was told to stop (SIGTERM, SIGINT) before
	// its work was done: exit 0, no failure, but no success either: only
	// the run-level metrics and JobLastStopped are pushed, and the last
	// success is kept.
	Stopped bool
	// Summary is a daily or weekly job's summary (nil for queue-process).
	Summary *engagement.JobSummary
	// Delivery is queue-process's summary or the jobs' queue step's (nil
	// when no queue step ran).
	Delivery *engagement.DeliverySummary
	// Queue is the backlog queue-process left (nil: not read).
	Queue *Queue
	// Verify is engagementctl verify's outcome (nil for the other binaries).
	Verify *Verify
	// Spend is what the last 30 days' messages cost, by Meta's pricing
	// category (engagementctl verify pushes it; nil for the others).
	Spend []SpendCategory
}

// SpendCategory is one pricing category's billable messages of the last 30
// days and their cost in US dollars (package pricing's spend: the priced
// ones only).
type SpendCategory struct {
	Category string
	Billable int64
	USD      float64
}

// Verify is what is pushed of engagementctl verify's report: whether every
// invariant held, and each check's violations. It is not verify.Report
// itself so that the jobs and queue-process, which push their runs through
// this package, do not link package verify.
type Verify struct {
	OK     bool
	Checks []VerifyCheck
}

// VerifyCheck is one invariant's violations, by its check's name.
type VerifyCheck struct {
	Name       string
	Violations int64
}

// Gatherer builds a fresh registry holding the run's metrics: every metric
// for a completed run, the run-level failure metrics for a failed one.
func Gatherer(r Run) prometheus.Gatherer {
	reg := registry{prometheus.NewRegistry()}
	gauge, vec := reg.gauge, reg.vec

	gauge(JobDuration, "How long the last run took, queue step included.").Set(r.Duration.Seconds())
	failed := gauge(JobLastRunFailed, "1 when the last run failed (exit 1), else 0.")
	end := float64(r.End.UnixNano()) / 1e9
	if r.Failed {
		failed.Set(1)
		gauge(JobLastFailure, "Unix time the last run ended, while it failed (exit 1).").Set(end)
		return reg.Registry
	}
	if r.Stopped {
		gauge(JobLastStopped, "Unix time the last run ended, while it was told to stop (SIGTERM) before its work was done.").Set(end)
		return reg.Registry
	}
	gauge(JobLastSuccess, "Unix time the last run that completed (exit 0 or 3) ended.").Set(end)

	if s := r.Summary; s != nil {
		pushSteps(vec, s)
	}
	if d := r.Delivery; d != nil {
		pushDelivery(vec, d)
	}
	if q := r.Queue; q != nil {
		gauge(QueuePending, "Pending messages after the last completed queue-process run, due or not.").Set(float64(q.Pending))
		gauge(QueueDue, "Pending messages already due after the last completed queue-process run.").Set(float64(q.Due))
		gauge(QueueOldestDueAge, "How long the oldest due pending message had waited after the last completed queue-process run (0: none due).").
			Set(q.OldestDueAge.Seconds())
	}
	if len(r.Spend) > 0 {
		usd := vec(SpendUSD, "US dollars Meta bills for the messages its Cloud API accepted in the last 30 days and delivered, by pricing category (at the prices given; the priced ones only; other transports cost Meta nothing).", "category")
		billable := vec(SpendBillable, "Messages Meta billed (delivered, not said free) of those its Cloud API accepted in the last 30 days, by pricing category.", "category")
		for _, c := range r.Spend {
			usd.WithLabelValues(c.Category).Set(c.USD)
			billable.WithLabelValues(c.Category).Set(float64(c.Billable))
		}
	}
	if v := r.Verify; v != nil {
		ok := gauge(VerifyOK, "1 when every invariant held at the last verify, else 0.")
		if v.OK {
			ok.Set(1)
		}
		violations := vec(VerifyViolations, "Rows breaking each invariant at the last verify.", "check")
		for _, c := range v.Checks {
			violations.WithLabelValues(c.Name).Set(float64(c.Violations))
		}
	}
	return reg.Registry
}

// registry is a fresh registry that registers each gauge as it is made,
// so that it holds only the metrics the run has figures for.
type registry struct{ *prometheus.Registry }

// gauge makes and registers a gauge without labels.
func (reg registry) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	reg.MustRegister(g)
	return g
}

// vec makes and registers a gauge with labels.
func (reg registry) vec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	reg.MustRegister(g)
	return g
}

// pushSteps sets a daily or weekly job's metrics: each step's users by
// outcome and the queue inserts it made.
func pushSteps(vec func(name, help string, labels ...string) *prometheus.GaugeVec, s *engagement.JobSummary) {
	users := vec(JobUsers, "Users a step considered in the last completed run, by outcome: succeeded, failed or skipped.", "step", "outcome")
	processed := vec(JobUsersProcessed, "Users a step acted on in the last completed run (succeeded + failed).", "step")
	messages := vec(JobMessages, "Queue inserts of a step in the last completed run, by result: queued (new rows) or duplicates (the idempotency key existed).", "step", "result")
	for _, st := range s.Steps {
		users.WithLabelValues(st.Name, "succeeded").Set(float64(st.Succeeded))
		users.WithLabelValues(st.Name, "failed").Set(float64(st.Failed))
		users.WithLabelValues(st.Name, "skipped").Set(float64(st.Skipped))
		processed.WithLabelValues(st.Name).Set(float64(st.Processed))
		messages.WithLabelValues(st.Name, "queued").Set(float64(st.Queued))
		messages.WithLabelValues(st.Name, "duplicates").Set(float64(st.Duplicates))
	}
}

// pushDelivery sets the metrics of a delivery (queue-process's, or the
// jobs' queue step's): what it settled, cancelled, deferred, failed or
// left claimed, and why it stopped.
func pushDelivery(vec func(name, help string, labels ...string) *prometheus.GaugeVec, d *engagement.DeliverySummary) {
	delivered := vec(DeliveryMessages, "Delivery attempts settled in the last completed run, by transport and result: sent, retried or failed.", "transport", "result")
	delivered.WithLabelValues(d.Transport, "sent").Set(float64(d.Sent))
	delivered.WithLabelValues(d.Transport, "retried").Set(float64(d.Retried))
	delivered.WithLabelValues(d.Transport, "failed").Set(float64(d.Failed))
	vec(DeliveryRecovered, "Abandoned claims (a worker died mid-send) the last completed run settled.", "transport").
		WithLabelValues(d.Transport).Set(float64(d.Recovered))
	reasons := deliveryCancelReasons()
	cancelled := vec(DeliveryCancelled, "Messages the last completed run found no longer wanted when it claimed them, by reason: "+strings.Join(reasons, ", ")+".", "transport", "reason")
	for _, reason := range reasons {
		cancelled.WithLabelValues(d.Transport, reason).Set(float64(d.CancelReasons[reason]))
	}
	vec(DeliveryDeferred, "Messages the last completed run left pending past when they were due: inside the quiet hours, or over the send budget.", "transport").
		WithLabelValues(d.Transport).Set(float64(d.Deferred))
	pushBudget(vec, d)
	vec(DeliveryInvalid, "Messages the last completed run failed because they could not be rendered (bad params, unknown key).", "transport").
		WithLabelValues(d.Transport).Set(float64(d.Invalid))
	vec(DeliveryReleased, "Claimed messages the last completed run handed back unsent (a shutdown, the deadline, an outage), their retries unspent.", "transport").
		WithLabelValues(d.Transport).Set(float64(d.Released))
	outage := 0.0
	if d.Stopped == "outage" {
		outage = 1
	}
	vec(DeliveryOutage, "1 when the last completed run stopped because the receiver was down (unreachable, or 502/503/504 to several messages in a row), else 0.", "transport").
		WithLabelValues(d.Transport).Set(outage)
	pushPause(vec, d)
	vec(DeliveryDeduplicated, "Messages the dedupe store stopped in the last completed run (its key was recorded as delivered): marked sent, not sent again.", "transport").
		WithLabelValues(d.Transport).Set(float64(d.Deduplicated))
	if d.DedupeChecks > 0 {
		vec(DedupeChecks, "Dedupe store operations (lookups before a send, records after one) in the last completed run.", "transport").
			WithLabelValues(d.Transport).Set(float64(d.DedupeChecks))
		vec(DedupeCheckErrors, "Dedupe store operations that failed in the last completed run (one the store failed open on included).", "transport").
			WithLabelValues(d.Transport).Set(float64(d.DedupeCheckErrors))
		vec(DedupeCheckSeconds, "Time the dedupe store's operations took in all in the last completed run (divide by engagement_dedupe_checks for the mean).", "transport").
			WithLabelValues(d.Transport).Set(d.DedupeCheckSeconds)
	}
	vec(DeliveryClaimsLeft, "Messages still claimed when the last completed run ended, because the database did not answer (-1: unknown); recovery settles them once the run's lease runs out.", "transport").
		WithLabelValues(d.Transport).Set(float64(d.ClaimsLeft))
}

// pushBudget sets the send budget's metrics, when the delivery had one:
// its limit, what it used, and the messages it deferred and left waiting.
func pushBudget(vec func(name, help string, labels ...string) *prometheus.GaugeVec, d *engagement.DeliverySummary) {
	b := d.Budget
	if b == nil {
		return
	}
	vec(BudgetDeferred, "Messages the last completed run found over the send budget and put in its line.", "transport").
		WithLabelValues(d.Transport).Set(float64(d.DeferReasons[sm.DeferredBudget]))
	vec(BudgetLimit, "Recipients the send budget's window may hold, as the last completed run left it (today's figure while a ramp warms up).", "transport").
		WithLabelValues(d.Transport).Set(float64(b.Limit))
	vec(BudgetUsed, "Slots of the send budget spent in the last 24 hours (a recipient each), as the last completed run left it.", "transport").
		WithLabelValues(d.Transport).Set(float64(b.Used))
	vec(BudgetWaiting, "Messages waiting on the send budget after the last completed run.", "transport").
		WithLabelValues(d.Transport).Set(float64(b.Waiting))
}

// ValidateLabelValue checks a grouping label value given by an operator:
// the Pushgateway takes it in a URL path, so it must be a plain word.
func ValidateLabelValue(v string) error {
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%q: use letters, digits, '-', '_' or '.'", v)
		}
	}
	return nil
}

// Pusher pushes runs to one Pushgateway.
type Pusher struct {
	base     string // the URL without its user info
	redacted string
	user     *url.Userinfo
	client   *http.Client
	timeout  time.Duration
}

// ErrInvalidURL is returned by NewPusher for a URL it cannot use.
var ErrInvalidURL = errors.New("not an http(s) URL with a host, like http://pushgateway:9091")

// NewPusher checks rawURL (http or https, with a host; user info, if any,
// is sent as basic auth) and returns a Pusher for it. The error never
// repeats rawURL, which may hold a password.
func NewPusher(rawURL string) (*Pusher, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, ErrInvalidURL
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w (without a query or fragment)", ErrInvalidURL)
	}
	p := &Pusher{user: u.User, client: &http.Client{}, timeout: DefaultPushTimeout}
	u.User = nil
	p.base = strings.TrimSuffix(u.String(), "/")
	if p.user != nil {
		u.User = url.UserPassword("xxxxx", "xxxxx")
	}
	p.redacted = strings.TrimSuffix(u.String(), "/")
	return p, nil
}

// URL returns the Pushgateway's URL fit for a log line: user info masked.
func (p *Pusher) URL() string { return p.redacted }

// Push pushes the run within the push timeout: a completed run replaces its
// group (PUT), a failed or stopped run adds its run-level metrics to it
// (POST). The error
// never holds the URL's user info.
func (p *Pusher) Push(ctx context.Context, r Run) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	pusher := push.New(p.base, r.Job).Gatherer(Gatherer(r)).Client(p.client)
	if r.Environment != "" {
		pusher = pusher.Grouping("environment", r.Environment)
	}
	if r.Shard != "" {
		pusher = pusher.Grouping("shard", r.Shard)
	}
	if p.user != nil {
		password, _ := p.user.Password()
		pusher = pusher.BasicAuth(p.user.Username(), password)
	}
	var err error
	if r.Failed || r.Stopped {
		err = pusher.AddContext(ctx)
	} else {
		err = pusher.PushContext(ctx)
	}
	if err != nil {
		return fmt.Errorf("push metrics to %s: %w", p.redacted, p.redact(err))
	}
	return nil
}

// redact strips the user info from err's text, should anything have put it
// there.
func (p *Pusher) redact(err error) error {
	if p.user == nil {
		return err
	}
	password, ok := p.user.Password()
	if !ok || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "xxxxx"))
}

// deliveryCancelReasons are the cancel reasons a delivery run can find:
// every one but operator (engagementctl cancel's, never a run's).
func deliveryCancelReasons() []string {
	return slices.DeleteFunc(sm.CancelReasons(), func(r string) bool { return r == sm.CancelOperator })
}

// pushPause sets engagement_transport_paused of d's transport: 1 for the
// kind of the pause the run stopped for, 0 for every other kind (all 0
// when it was not paused), so that an alert on it resolves.
func pushPause(vec func(name, help string, labels ...string) *prometheus.GaugeVec, d *engagement.DeliverySummary) {
	paused := vec(TransportPaused, "1 when the last completed run stopped because its transport is paused: the bot said WhatsApp refuses its whole account, of this kind (reachout_timelock, rate_overlimit, logged_out, banned), else 0.", "transport", "kind")
	for _, kind := range transport.AccountKinds {
		v := 0.0
		if d.Stopped == "account_paused" && d.Pause != nil && d.Pause.Kind == kind {
			v = 1
		}
		paused.WithLabelValues(d.Transport, kind).Set(v)
	}
}
