package engagement

import (
	"bytes"
	"encoding/json"
	"time"
)

// maxErrors bounds JobSummary.Errors; Failed still counts every failure.
const maxErrors = 100

// Counts are the counters of a job and of each of its steps; the keys of
// SkipReasons are statemachine.SkipReasons.
type Counts struct {
	Processed   int            `json:"processed"`          // users acted on: Succeeded + Failed
	Succeeded   int            `json:"succeeded"`          // users moved (or, weekly, reviewed)
	Failed      int            `json:"failed"`             // users whose write failed; see Errors
	Skipped     int            `json:"skipped"`            // users who qualified but were excluded
	Queued      int            `json:"queued"`             // new queue rows
	Duplicates  int            `json:"duplicates"`         // inserts that hit an existing idempotency key
	HeldOut     int            `json:"held_out,omitempty"` // users moved without their message: the goodbye's holdout
	SkipReasons map[string]int `json:"skip_reasons,omitempty"`
}

// Skip counts n users skipped for reason (one of statemachine.SkipReasons).
func (c *Counts) Skip(reason string, n int) {
	if n == 0 {
		return
	}
	if c.SkipReasons == nil {
		c.SkipReasons = make(map[string]int)
	}
	c.SkipReasons[reason] += n
	c.Skipped += n
}

// Add adds o's counters to c's.
func (c *Counts) Add(o Counts) {
	c.Processed += o.Processed
	c.Succeeded += o.Succeeded
	c.Failed += o.Failed
	c.Queued += o.Queued
	c.Duplicates += o.Duplicates
	c.HeldOut += o.HeldOut
	for reason, n := range o.SkipReasons {
		c.Skip(reason, n)
	}
}

// Step is one step's name and counters.
type Step struct {
	Name string
	Counts
}

// Steps marshal as a JSON object whose keys keep the order the steps ran in.
type Steps []Step

// MarshalJSON writes {"name":{counters},...} in run order.
func (s Steps) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, step := range s {
		if i > 0 {
			buf.WriteByte(',')
		}
		name, _ := json.Marshal(step.Name)
		counts, err := json.Marshal(step.Counts)
		if err != nil {
			return nil, err
		}
		buf.Write(name)
		buf.WriteByte(':')
		buf.Write(counts)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UserError is one user's failure.
type UserError struct {
	UserID string `json:"user_id"`
	Step   string `json:"step,omitempty"`
	Error  string `json:"error"`
}

// JobSummary is what a job run did (engagement-daily, engagement-weekly): the JSON line of --output json, the counters
// of the engagement_job_runs row and of the logs.
type JobSummary struct {
	Job     string    `json:"job"`
	AsOf    time.Time `json:"as_of"`
	ISOWeek string    `json:"iso_week,omitempty"`
	// Shard is "i/N" when the run handled one shard of the users.
	Shard  string `json:"shard,omitempty"`
	DryRun bool   `json:"dry_run"`
	RunID  int64  `json:"run_id,omitempty"`
	Counts
	DurationMS int64       `json:"duration_ms"`
	Steps      Steps       `json:"steps"`
	Errors     []UserError `json:"errors"`
	// ErrorsTruncated is set when more users failed than Errors lists.
	ErrorsTruncated bool `json:"errors_truncated,omitempty"`
	// Messages counts, per message type, the rows queued and the inserts
	// that hit an existing idempotency key: the effectiveness of
	// idempotency at a glance.
	Messages map[string]*MessageCounts `json:"messages,omitempty"`
	// Delivery is the trailing queue step's summary, when it ran.
	Delivery *DeliverySummary `json:"delivery,omitempty"`
	// Stopped says why the run stopped before its work was done:
	// "shutdown" (scheduler.StoppedShutdown: SIGINT or SIGTERM), as queue-process's
	// summary says it. The counters are what it did; the next run does
	// the rest. Empty when the run did everything.
	Stopped string `json:"stopped,omitempty"`
}

// MessageCounts are the queue inserts of one message type.
type MessageCounts struct {
	Queued     int `json:"queued"`
	Duplicates int `json:"duplicates"`
}

// AddMessages counts c's queue inserts under messageType.
func (s *JobSummary) AddMessages(messageType string, c Counts) {
	if s.Messages == nil {
		s.Messages = make(map[string]*MessageCounts)
	}
	m := s.Messages[messageType]
	if m == nil {
		m = &MessageCounts{}
		s.Messages[messageType] = m
	}
	m.Queued += c.Queued
	m.Duplicates += c.Duplicates
}

// Partial reports whether any user failed.
func (s *JobSummary) Partial() bool { return s.Failed > 0 }

// AddStep appends a step's counters to the run's, with its failures
// (up to maxErrors in all).
func (s *JobSummary) AddStep(step Step, errs []UserError) {
	s.Steps = append(s.Steps, step)
	s.Add(step.Counts)
	for _, e := range errs {
		if len(s.Errors) == maxErrors {
			s.ErrorsTruncated = true
			break
		}
		s.Errors = append(s.Errors, e)
	}
}

// DeliverySummary is what a run of the processor did.
type DeliverySummary struct {
	Job       string `json:"job"`
	Transport string `json:"transport"`
	// RunID is the run's engagement_job_runs row (queue-process records
	// one; the jobs' queue step is part of the job's run: 0).
	RunID     int64 `json:"run_id,omitempty"`
	Processed int   `json:"processed"` // delivery attempts settled: sent + retried + failed
	Sent      int   `json:"sent"`
	Retried   int   `json:"retried"` // attempts that failed and were rescheduled
	Failed    int   `json:"failed"`  // messages that ended failed
	Recovered int   `json:"recovered"`
	// Deduplicated counts messages the dedupe store stopped (marked sent).
	Deduplicated int `json:"deduplicated,omitempty"`
	// DedupeChecks counts the dedupe store's operations (lookups before a
	// send, records after one), DedupeCheckErrors those that failed (one
	// the store failed open on included), DedupeCheckSeconds their time
	// in all. With --dedupe-store only.
	DedupeChecks       int     `json:"dedupe_checks,omitempty"`
	DedupeCheckErrors  int     `json:"dedupe_check_errors,omitempty"`
	DedupeCheckSeconds float64 `json:"dedupe_check_seconds,omitempty"`
	// Invalid counts the failed messages that could not be rendered: bad
	// message_params, an unknown message key.
	Invalid int `json:"invalid"`
	// ClaimsLost counts messages whose claim this run lost to another
	// process before it could start or record their send.
	ClaimsLost int `json:"claims_lost"`
	// Cancelled counts messages found no longer wanted when claimed or
	// just before their send (claim.sql, recheck.sql), by reason in
	// CancelReasons: sm.CancelReasons (operator only for a message in doubt
	// an operator cancelled, which the run cancelled once the receiver said
	// it never had it).
	Cancelled     int            `json:"cancelled"`
	CancelReasons map[string]int `json:"cancel_reasons,omitempty"`
	// Deferred counts messages left pending past when they were due, by
	// reason in DeferReasons: quiet_hours (due inside them: moved to their
	// end), budget (over the send budget: moved to their place in line).
	Deferred     int            `json:"deferred"`
	DeferReasons map[string]int `json:"defer_reasons,omitempty"`
	// Budget is the send budget as the run leaves it (with --daily-limit).
	Budget *BudgetState `json:"budget,omitempty"`
	// Number is Meta's verdict on the number as the run read it
	// (whatsapp-cloud).
	Number *NumberHealth `json:"number,omitempty"`
	// Pace is the run's pace (with pacing): the least gap, the jitter, and
	// whether the day's budget fits in the waking hours at it.
	Pace *Pace `json:"pace,omitempty"`
	// Throughput is the number's throughput ceiling the run kept under,
	// and how often Meta said 130429 (whatsapp-cloud; throughput.go).
	Throughput *Throughput `json:"throughput,omitempty"`
	// Released counts claimed messages handed back unsent, due as they
	// were and their retries unspent: at a shutdown, the deadline, an
	// outage.
	Released int `json:"released"`
	// ClaimsLeft counts the messages still claimed when the run ended
	// (it could not hand them back: the database did not answer); -1 when
	// even their number is unknown. Recovery settles them once the run's
	// lease runs out.
	ClaimsLeft int `json:"claims_left"`
	// Stopped says why the run stopped before the queue was drained:
	// "shutdown" (SIGTERM), "deadline" (--max-duration), "outage" (the
	// receiver is down; Outage says how), "lease_lost" (the run could not
	// renew its lease in time), "account_paused" (the transport is paused:
	// the receiver refused the whole account; Pause says how and until
	// when). Empty when it drained the queue.
	Stopped    string `json:"stopped,omitempty"`
	Outage     string `json:"outage,omitempty"`
	Pause      *Pause `json:"pause,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// BudgetState is a transport's send budget as a run leaves it.
type BudgetState struct {
	Limit int `json:"limit"` // recipients the window may hold now (the ramp's figure, when ramping)
	Used  int `json:"used"`  // recipients in the window
	// Waiting counts the messages pending on the budget (every transport's:
	// a queue row does not say which transport will send it).
	Waiting int `json:"waiting"`
	// NextSlotAt is when the next slot frees, when the window is full.
	NextSlotAt *time.Time `json:"next_slot_at,omitempty"`
}

// NumberHealth is Meta's verdict as a run found it.
type NumberHealth struct {
	QualityRating      string     `json:"quality_rating,omitempty"`
	MessagingLimitTier string     `json:"messaging_limit_tier,omitempty"`
	Flagged            bool       `json:"flagged,omitempty"`
	ReadAt             *time.Time `json:"read_at,omitempty"`
	PausedTemplates    []string   `json:"paused_templates,omitempty"`
	// Holding says the marketing kinds wait (RED or FLAGGED).
	Holding bool `json:"holding_marketing,omitempty"`
	// Stale says the last read failed: these are the last known values.
	Stale bool `json:"stale,omitempty"`
}

// Pace is how a run paces its sends: the arithmetic queue-process logs at
// start and engagementctl status shows.
type Pace struct {
	// Interval is the least gap between two sends' starts (the floor);
	// Jitter the most added to it at random.
	Interval time.Duration
	Jitter   time.Duration
	// Spread says the budget is spread over the waking hours.
	Spread bool
	// Waking is the day less the quiet hours; Limit the budget's limit
	// today (0: no budget).
	Waking time.Duration
	Limit  int
	// Needs is how long the day's budget takes at this pace, on average;
	// Fits whether that is within the waking hours.
	Needs time.Duration
	Fits  bool
}

// MarshalJSON writes the durations in seconds: {"interval_seconds": 114,
// "jitter_seconds": 60, "spread": true, "waking_seconds": 43200,
// "limit": 300, "needs_seconds": 43200, "fits": true}.
func (p Pace) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Interval float64 `json:"interval_seconds"`
		Jitter   float64 `json:"jitter_seconds"`
		Spread   bool    `json:"spread"`
		Waking   float64 `json:"waking_seconds"`
		Limit    int     `json:"limit"`
		Needs    float64 `json:"needs_seconds,omitempty"`
		Fits     bool    `json:"fits"`
	}{p.Interval.Seconds(), p.Jitter.Seconds(), p.Spread, p.Waking.Seconds(), p.Limit, p.Needs.Seconds(), p.Fits})
}

// Throughput is the run's throughput ceiling and what Meta said of it.
type Throughput struct {
	// CeilingMPS is the most messages a second the run starts, and Source
	// where it came from: graph_api (Meta's level), flag
	// (--whatsapp-throughput), business_app (the number is, or was last
	// seen, on the WhatsApp Business app, or --whatsapp-coexistence),
	// default (80: nothing said otherwise).
	CeilingMPS int    `json:"ceiling_mps"`
	Source     string `json:"source"`
	// Level is Meta's throughput level as read (STANDARD, HIGH); "" when
	// the answer did not say.
	Level string `json:"level,omitempty"`
	// RateMPS is the rate the run ended at: below the ceiling after Meta
	// said 130429.
	RateMPS float64 `json:"rate_mps"`
	// RateLimited counts Meta's 130429 answers.
	RateLimited int `json:"rate_limited"`
}

// Pause is an account-wide refusal of a transport, as recorded in
// engagement_transport_pauses (migration 80): the receiver said WhatsApp
// refuses the bot's whole account (../shared/CONTRACT.md, round seven, "An
// unofficial number's limits"). While it is active no queue-process of the
// transport claims or sends anything.
type Pause struct {
	Transport  string     `json:"transport"`
	Kind       string     `json:"kind"` // one of transport.AccountKinds
	StatusCode int        `json:"status_code"`
	Since      time.Time  `json:"since"`
	Until      *time.Time `json:"until,omitempty"` // nil: until an operator clears it
	// Advice says what the operator can do about Kind.
	Advice string `json:"advice"`
	// What engagementctl pause list and the console show besides.
	PausedBy  string     `json:"paused_by,omitempty"`
	Refusals  int        `json:"refusals,omitempty"`
	ClearedAt *time.Time `json:"cleared_at,omitempty"`
	ClearedBy *string    `json:"cleared_by,omitempty"`
	Active    bool       `json:"active"`
}
