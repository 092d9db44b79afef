package scheduler

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
)

// maxErrors bounds Summary.Errors; Failed still counts every failure.
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

func (c *Counts) skip(reason string, n int) {
	if n == 0 {
		return
	}
	if c.SkipReasons == nil {
		c.SkipReasons = make(map[string]int)
	}
	c.SkipReasons[reason] += n
	c.Skipped += n
}

func (c *Counts) add(o Counts) {
	c.Processed += o.Processed
	c.Succeeded += o.Succeeded
	c.Failed += o.Failed
	c.Queued += o.Queued
	c.Duplicates += o.Duplicates
	c.HeldOut += o.HeldOut
	for reason, n := range o.SkipReasons {
		c.skip(reason, n)
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

// Summary is what a job run did: the JSON line of --output json, the counters
// of the engagement_job_runs row and of the logs.
type Summary struct {
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
	Delivery *delivery.ProcessSummary `json:"delivery,omitempty"`
	// Stopped says why the run stopped before its work was done:
	// "shutdown" (StoppedShutdown: SIGINT or SIGTERM), as queue-process's
	// summary says it. The counters are what it did; the next run does
	// the rest. Empty when the run did everything.
	Stopped string `json:"stopped,omitempty"`
}

// MessageCounts are the queue inserts of one message type.
type MessageCounts struct {
	Queued     int `json:"queued"`
	Duplicates int `json:"duplicates"`
}

func (s *Summary) addMessages(messageType string, c Counts) {
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
func (s *Summary) Partial() bool { return s.Failed > 0 }

func (s *Summary) addStep(step Step, errs []UserError) {
	s.Steps = append(s.Steps, step)
	s.add(step.Counts)
	for _, e := range errs {
		if len(s.Errors) == maxErrors {
			s.ErrorsTruncated = true
			break
		}
		s.Errors = append(s.Errors, e)
	}
}
