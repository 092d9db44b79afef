package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/sender"
)

// enqueueOptions is one engagementctl enqueue.
type enqueueOptions struct {
	cmdIO
	dbOptions
	m                            sender.Message
	params, scheduledFor, output string
	periodStart, replayUntil     string
	logs                         logFlags

	log zerolog.Logger // set by Validate
}

func newEnqueueCommand(databaseURL *string, runF func(*enqueueOptions) error) *cobra.Command {
	o := &enqueueOptions{dbOptions: dbOptions{dbURL: databaseURL}}
	cmd := &cobra.Command{
		Use:   "enqueue",
		Short: "Queue one message, idempotently when given a key",
		Long: `Queues one message. With --idempotency-key (trimmed; at most 128
characters, no control characters such as CR, LF or tab inside), the first
call creates the message and every later call with that key returns the
same id with "created": false and changes nothing, also under concurrent
callers. A key that breaks the rule is refused (exit 2, nothing written):
queue-process could not send it. Without a key every call creates a
message. --destination and --jid default to the user's profile routing.`,
		Args: cobra.NoArgs,
		RunE: runOptions(o, runF),
	}
	fs := cmd.Flags()
	fs.StringVar(&o.m.UserID, "user-id", "", "the user's id (UUID)")
	fs.StringVar(&o.m.Type, "type", "", "message type, e.g. weekly_review")
	fs.StringVar(&o.m.Key, "key", "", "message catalog key, e.g. engagement.weekly_review.celebration")
	fs.StringVar(&o.params, "params", "", `message params, a JSON object of strings`)
	fs.StringVar(&o.m.Destination, "destination", "", "individual or group (default: the profile's routing)")
	fs.StringVar(&o.m.DestinationJID, "jid", "", "destination JID (default: the profile's routing)")
	fs.StringVar(&o.scheduledFor, "scheduled-for", "", "when to send, RFC3339 (default: now)")
	fs.StringVar(&o.m.IdempotencyKey, "idempotency-key", "", "at most 128 characters, no control characters; a repeated key changes nothing")
	fs.StringVar(&o.periodStart, "period-start", "", "start of the period the key covers, RFC3339 (e.g. the goodbye's UTC day); stored for verify")
	fs.StringVar(&o.replayUntil, "replay-until", "", "until when the key could be produced again, RFC3339; cleanup keeps the message until then (default: none: it ages from when it was queued)")
	fs.StringVar(&o.output, "output", "text", "text or json")
	o.logs.register(fs)
	return cmd
}

// Validate checks every flag and builds the message.
func (o *enqueueOptions) Validate() error {
	if err := requireDatabaseURL(*o.dbURL); err != nil {
		return err
	}
	if err := validateOutput(o.output); err != nil {
		return err
	}
	var err error
	if o.log, err = o.logs.logger(o.stderr, "engagementctl"); err != nil {
		return err
	}
	var id pgtype.UUID
	if err := id.Scan(strings.TrimSpace(o.m.UserID)); err != nil || !id.Valid {
		return usagef("--user-id %q is not a UUID", o.m.UserID)
	}
	o.m.UserID = id.String()
	if strings.TrimSpace(o.m.Type) == "" {
		return usagef("--type is required (e.g. goodbye, weekly_review, reminder)")
	}
	if o.m.Destination != "" && o.m.Destination != sender.DestinationIndividual && o.m.Destination != sender.DestinationGroup {
		return usagef("--destination must be individual or group, got %q", o.m.Destination)
	}
	if o.params != "" {
		if err := json.Unmarshal([]byte(o.params), &o.m.Params); err != nil {
			return usagef(`--params must be a JSON object of strings, like {"count":"3"}: %v`, err)
		}
		for k, v := range o.m.Params {
			// PostgreSQL's jsonb has no NUL character: it would
			// refuse the row with its own error.
			if strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0) {
				return usagef(`--params: %q holds a NUL character (\u0000), which PostgreSQL cannot store`, strings.ReplaceAll(k, "\x00", `\u0000`))
			}
		}
	}
	if o.scheduledFor != "" {
		if o.m.ScheduledFor, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(o.scheduledFor)); err != nil {
			return usagef("--scheduled-for %q is not an RFC3339 instant", o.scheduledFor)
		}
	}
	for _, f := range []struct {
		flag, value string
		into        *time.Time
	}{{"period-start", o.periodStart, &o.m.PeriodStart}, {"replay-until", o.replayUntil, &o.m.ReplayUntil}} {
		if f.value == "" {
			continue
		}
		if *f.into, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(f.value)); err != nil {
			return usagef("--%s %q is not an RFC3339 instant", f.flag, f.value)
		}
	}
	// The rule delivery applies to a stored key (sender.ValidateKey): a
	// key it would refuse is refused here, before anything is written.
	if o.m.IdempotencyKey, err = sender.NormalizeKey(o.m.IdempotencyKey); err != nil {
		return usagef("--idempotency-key: %w", err)
	}
	return nil
}

func (o *enqueueOptions) Run(ctx context.Context) error {
	q, err := sender.Enqueue(ctx, o.pool, o.m)
	switch {
	case errors.Is(err, sender.ErrNoDestination), errors.Is(err, sender.ErrNoCatalogKey):
		return usageError(err)
	case err != nil:
		return err
	}
	if q.PayloadDiffers {
		o.log.Warn().Str("idempotency_key", o.m.IdempotencyKey).Str("message_id", q.ID).
			Msg("idempotency key replayed with a different payload; the first message stands")
	}
	if o.output == "json" {
		return json.NewEncoder(o.stdout).Encode(struct {
			ID      string `json:"id"`
			Created bool   `json:"created"`
		}{q.ID, !q.Duplicate})
	}
	verb := "queued"
	if q.Duplicate {
		verb = "already queued under this key"
	}
	_, err = fmt.Fprintf(o.stdout, "%s %s\n", q.ID, verb)
	return err
}
