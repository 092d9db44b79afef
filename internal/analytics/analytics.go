// Package analytics reports what a job run committed to PostHog, with the
// official PostHog Go client: one engagement_state_changed event per row the
// run wrote to engagement_state_transitions, and one
// engagement_weekly_review_sent event per weekly review the run queued.
//
// The events are read back from the database after the run, by its
// engagement_job_runs id (job_run_id on both tables), so they describe
// exactly what committed: a batch that rolled back sends nothing, and a
// re-run that changed nothing sends nothing. The weekly review event fires
// when the review is queued, not when queue-process delivers it.
//
// Publishing never blocks or fails a job for long: PublishRun is bounded by
// Config.Timeout as a whole (reading, sending, retrying), holds at most a
// few batches in flight, and reports trouble as an error the caller logs.
// Events carry no JID, message text or API key.
package analytics

import (
	"cmp"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/posthog/posthog-go"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/internal/recovered"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Event names.
const (
	// EventStateChanged is sent for every state transition a run applied.
	EventStateChanged = "engagement_state_changed"
	// EventWeeklyReviewSent is sent for every weekly review a run queued
	// (at queue time: delivery is queue-process's business).
	EventWeeklyReviewSent = "engagement_weekly_review_sent"
)

// Defaults of Config.
const (
	// DefaultEndpoint is the PostHog host the official client uses by default.
	DefaultEndpoint = posthog.DefaultEndpoint
	// DefaultTimeout bounds a whole PublishRun.
	DefaultTimeout = 10 * time.Second
)

const (
	// maxInFlight bounds the events handed to the client and not yet sent
	// or given up: a few full batches, whatever the size of the run.
	maxInFlight = 8 * posthog.DefaultBatchSize
	// flushInterval is how soon the client sends a partial batch. Short, so
	// the last events of a run go out (and can be retried) within the budget.
	flushInterval = 200 * time.Millisecond
	// closeGrace is how long PostHog's client may take to settle after the
	// budget ran out; its requests are cancelled by then, so it is quick.
	closeGrace = time.Second
)

// Config configures PublishRun.
type Config struct {
	// APIKey is the PostHog project API key; required.
	APIKey string
	// Endpoint is the PostHog host (DefaultEndpoint when empty).
	Endpoint string
	// Timeout bounds the whole publication (DefaultTimeout when 0): events
	// not sent by then are dropped.
	Timeout time.Duration
	// Logger receives the PostHog client's own messages, at debug level.
	Logger zerolog.Logger
}

// Result counts a publication's events.
type Result struct {
	Events int // events read from the run's rows and handed to the client
	Sent   int // events PostHog accepted
	Failed int // events dropped: rejected, unreachable, or out of time
}

// PublishRun sends the analytics events of the job run runID (its
// engagement_job_runs id) to PostHog. It returns when every event is sent or
// given up, and at the latest after cfg.Timeout (plus a second for the
// client to settle). The error says what went wrong (the run could not be
// read, events were dropped); the caller logs it and carries on.
func PublishRun(ctx context.Context, pool *pgxpool.Pool, runID int64, cfg Config) (Result, error) {
	if cfg.APIKey == "" {
		return Result{}, errors.New("analytics: no PostHog API key")
	}
	timeout := cmp.Or(cfg.Timeout, DefaultTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	r, err := runQuery.One(ctx, pool, runArgs{RunID: runID})
	if err != nil {
		return Result{}, fmt.Errorf("analytics: read run %d: %w", runID, err)
	}
	run := runInfo{id: runID, job: r.Job, asOf: r.AsOf.UTC()}

	t := newTally()
	client, err := posthog.NewWithConfig(cfg.APIKey, posthog.Config{
		Endpoint: strings.TrimRight(cmp.Or(cfg.Endpoint, DefaultEndpoint), "/"),
		Interval: flushInterval,
		// Every request is cancelled when the budget runs out, so a hanging
		// PostHog holds nothing past it.
		Transport: boundTransport{ctx: ctx, base: http.DefaultTransport},
		Logger:    clientLogger{cfg.Logger},
		Callback:  t,
	})
	if err != nil {
		return Result{}, fmt.Errorf("analytics: configure the PostHog client: %w", err)
	}

	readErr := enqueueTransitions(ctx, pool, client, run, t)
	if readErr == nil {
		readErr = enqueueWeeklyReviews(ctx, pool, client, run, t)
	}
	// Wait until PostHog has every event (the client retries failures with
	// backoff meanwhile), then close; closing gives up on retries, and the
	// transport has given up on requests once the budget is spent.
	_ = t.wait(ctx)
	closeErr := closeClient(ctx, client)

	res, lastErr := t.result()
	switch {
	case closeErr != nil:
		return res, fmt.Errorf("analytics: closing the PostHog client: %w", closeErr)
	case readErr != nil && ctx.Err() != nil:
		return res, fmt.Errorf("analytics: out of time (%s) reading run %d's rows; %d events handed over, %d sent", timeout, runID, res.Events, res.Sent)
	case readErr != nil:
		return res, fmt.Errorf("analytics: read run %d's rows: %w", runID, readErr)
	case res.Sent < res.Events:
		reason := "out of time (" + timeout.String() + ")"
		if lastErr != nil {
			reason = lastErr.Error()
		}
		return res, fmt.Errorf("analytics: %d of %d events not sent: %s", res.Events-res.Sent, res.Events, reason)
	}
	return res, nil
}

// closeClient closes the PostHog client, giving up its retries, and waits
// for it to close until ctx's end and then at most closeGrace more, so
// that a client stuck closing does not hold the run. Its error is a panic
// in the client's Close, if any.
func closeClient(ctx context.Context, client posthog.Client) (closeErr error) {
	closed := make(chan error, 1) // a panic in the client's Close, if any
	go func() { closed <- recovered.Call(func() { _ = client.Close() }) }()
	select {
	case closeErr = <-closed:
	case <-ctx.Done():
		select {
		case closeErr = <-closed:
		case <-time.After(closeGrace):
		}
	}
	return closeErr
}

// runInfo is what every event of a run carries.
type runInfo struct {
	id   int64
	job  string
	asOf time.Time
}

func (r runInfo) properties() posthog.Properties {
	return posthog.NewProperties().
		Set("job", r.job).
		Set("run_id", r.id).
		Set("as_of", r.asOf.Format(time.RFC3339))
}

// enqueueTransitions streams the run's transitions into the client.
func enqueueTransitions(ctx context.Context, pool *pgxpool.Pool, client posthog.Client, run runInfo, t *tally) error {
	return runTransitionsQuery.Each(ctx, pool, runTransitionsArgs{RunID: run.id}, func(tr *runTransitionsRow) error {
		props := run.properties().
			Set("from_state", tr.FromState).
			Set("to_state", tr.ToState).
			Set("trigger", tr.Trigger)
		if tr.Trigger == string(sm.Inactivity14d) {
			// The goodbye's arm, and its copy variant if it has one: a
			// PostHog funnel can split by them (docs/holdout.md).
			props = props.Set("holdout", tr.Holdout)
			if tr.Variant != "" {
				props = props.Set("variant", tr.Variant)
			}
		}
		return t.enqueue(ctx, client, posthog.Capture{
			Uuid:       eventUUID(EventStateChanged, tr.UserID, strconv.FormatInt(tr.ID, 10)),
			DistinctId: tr.UserID,
			Event:      EventStateChanged,
			Timestamp:  tr.CreatedAt,
			Properties: props,
		})
	})
}

// enqueueWeeklyReviews streams the weekly reviews the run queued into the client.
func enqueueWeeklyReviews(ctx context.Context, pool *pgxpool.Pool, client posthog.Client, run runInfo, t *tally) error {
	review, _ := sm.KindOf(sm.WeeklyReviewMessage)
	isoWeek := review.Period.Label(run.asOf)
	args := runMessagesArgs{RunID: run.id, MessageType: string(review.Message)}
	return runMessagesQuery.Each(ctx, pool, args, func(m *runMessagesRow) error {
		props := run.properties().Set("iso_week", isoWeek)
		if m.TransactionCount != nil {
			if n, err := strconv.Atoi(*m.TransactionCount); err == nil {
				props.Set("transaction_count", n)
			}
		}
		return t.enqueue(ctx, client, posthog.Capture{
			Uuid:       eventUUID(EventWeeklyReviewSent, m.UserID, m.ID),
			DistinctId: m.UserID,
			Event:      EventWeeklyReviewSent,
			Timestamp:  m.CreatedAt,
			Properties: props,
		})
	})
}

// eventNamespace is the UUID namespace of the events' ids.
var eventNamespace = [16]byte{0x5b, 0x0e, 0x6a, 0x1c, 0x8f, 0x3d, 0x4e, 0x21, 0x9a, 0x47, 0x0c, 0xd2, 0x61, 0xe8, 0x3f, 0x95}

// eventUUID is a name-based (version 5) UUID of an event and the row it
// reports: the same row always yields the same event id, so a resend is
// recognisable as one in PostHog.
func eventUUID(parts ...string) string {
	h := sha1.New()
	h.Write(eventNamespace[:])
	h.Write([]byte(strings.Join(parts, ":")))
	s := h.Sum(nil)
	s[6] = s[6]&0x0f | 0x50
	s[8] = s[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

// tally counts events and bounds those in flight. It is the client's
// Callback: PostHog's client reports every message it was handed exactly
// once, as sent or as dropped.
type tally struct {
	slots   chan struct{} // one per event in flight
	changed chan struct{} // a nudge for wait, after each report

	mu       sync.Mutex
	enqueued int
	sent     int
	failed   int
	lastErr  error
}

func newTally() *tally {
	return &tally{slots: make(chan struct{}, maxInFlight), changed: make(chan struct{}, 1)}
}

// enqueue hands c to the client once an in-flight slot is free; it returns
// ctx's error when the budget runs out first.
func (t *tally) enqueue(ctx context.Context, client posthog.Client, c posthog.Capture) error {
	select {
	case t.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := client.Enqueue(c); err != nil {
		<-t.slots
		t.mu.Lock()
		t.enqueued++
		t.failed++
		t.lastErr = err
		t.mu.Unlock()
		return nil
	}
	t.mu.Lock()
	t.enqueued++
	t.mu.Unlock()
	return nil
}

// Success implements posthog.Callback.
func (t *tally) Success(posthog.APIMessage) { t.report(nil) }

// Failure implements posthog.Callback.
func (t *tally) Failure(_ posthog.APIMessage, err error) { t.report(err) }

func (t *tally) report(err error) {
	t.mu.Lock()
	if err == nil {
		t.sent++
	} else {
		t.failed++
		t.lastErr = err
	}
	t.mu.Unlock()
	select {
	case <-t.slots:
	default:
	}
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// wait returns once every enqueued event was reported, or when ctx ends.
func (t *tally) wait(ctx context.Context) error {
	for {
		t.mu.Lock()
		done := t.sent+t.failed >= t.enqueued
		t.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-t.changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (t *tally) result() (Result, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// An event neither sent nor reported by the time the client was let go
	// is dropped all the same.
	return Result{Events: t.enqueued, Sent: t.sent, Failed: t.enqueued - t.sent}, t.lastErr
}

// boundTransport ties every request to ctx, the publication's budget.
type boundTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

func (b boundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := b.ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := mergeCancel(req.Context(), b.ctx)
	res, err := b.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	res.Body = cancelOnClose{ReadCloser: res.Body, cancel: cancel}
	return res, nil
}

// mergeCancel is a context of parent that also ends when other does.
func mergeCancel(parent, other context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := context.AfterFunc(other, func() { cancel(context.Cause(other)) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// cancelOnClose releases a request's merged context with its body.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// clientLogger passes the PostHog client's messages to zerolog at debug
// level: PublishRun's error sums up the failures in one line instead. The
// client's messages carry status lines and URLs, never the API key.
type clientLogger struct{ log zerolog.Logger }

func (l clientLogger) Logf(format string, args ...any) {
	l.log.Debug().Str("component", "posthog").Msgf(format, args...)
}

func (l clientLogger) Errorf(format string, args ...any) {
	l.log.Debug().Str("component", "posthog").Msgf(format, args...)
}
