package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/sender"
)

func newEnqueueCommand(databaseURL *string) *cobra.Command {
	var (
		m                            sender.Message
		params, scheduledFor, output string
		periodStart, replayUntil     string
		logs                         logFlags
	)
	cmd := &cobra.Command{
		Use:   "enqueue",
		Short: "Queue one message, idempotently when given a key",
		Long: `Queues one message. With --idempotency-key (trimmed; at most 128
characters), the first call creates the message and every later call with
that key returns the same id with "created": false and changes nothing,
also under concurrent callers. Without a key every call creates a message.
--destination and --jid default to the user's profile routing.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if err := requireDatabaseURL(*databaseURL); err != nil {
				return err
			}
			if err := validateOutput(output); err != nil {
				return err
			}
			log, err := logs.logger(cmd.ErrOrStderr(), "engagementctl")
			if err != nil {
				return err
			}
			var id pgtype.UUID
			if err := id.Scan(strings.TrimSpace(m.UserID)); err != nil || !id.Valid {
				return usagef("--user-id %q is not a UUID", m.UserID)
			}
			m.UserID = id.String()
			if strings.TrimSpace(m.Type) == "" {
				return usagef("--type is required (e.g. goodbye, weekly_review, reminder)")
			}
			if m.Destination != "" && m.Destination != sender.DestinationIndividual && m.Destination != sender.DestinationGroup {
				return usagef("--destination must be individual or group, got %q", m.Destination)
			}
			if params != "" {
				if err := json.Unmarshal([]byte(params), &m.Params); err != nil {
					return usagef(`--params must be a JSON object of strings, like {"count":"3"}: %v`, err)
				}
				for k, v := range m.Params {
					// PostgreSQL's jsonb has no NUL character: it would
					// refuse the row with its own error.
					if strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0) {
						return usagef(`--params: %q holds a NUL character (\u0000), which PostgreSQL cannot store`, strings.ReplaceAll(k, "\x00", `\u0000`))
					}
				}
			}
			if scheduledFor != "" {
				if m.ScheduledFor, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(scheduledFor)); err != nil {
					return usagef("--scheduled-for %q is not an RFC3339 instant", scheduledFor)
				}
			}
			for _, f := range []struct {
				flag, value string
				into        *time.Time
			}{{"period-start", periodStart, &m.PeriodStart}, {"replay-until", replayUntil, &m.ReplayUntil}} {
				if f.value == "" {
					continue
				}
				if *f.into, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(f.value)); err != nil {
					return usagef("--%s %q is not an RFC3339 instant", f.flag, f.value)
				}
			}
			if m.IdempotencyKey, err = sender.NormalizeKey(m.IdempotencyKey); err != nil {
				return usageError(err)
			}

			ctx := cmd.Context()
			pool, err := openChecked(ctx, *databaseURL, "engagementctl")
			if err != nil {
				return err
			}
			defer pool.Close()
			q, err := sender.Enqueue(ctx, pool, m)
			switch {
			case errors.Is(err, sender.ErrNoDestination):
				return usageError(err)
			case err != nil:
				return err
			}
			if q.PayloadDiffers {
				log.Warn().Str("idempotency_key", m.IdempotencyKey).Str("message_id", q.ID).
					Msg("idempotency key replayed with a different payload; the first message stands")
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
					ID      string `json:"id"`
					Created bool   `json:"created"`
				}{q.ID, !q.Duplicate})
			}
			verb := "queued"
			if q.Duplicate {
				verb = "already queued under this key"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", q.ID, verb)
			return err
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&m.UserID, "user-id", "", "the user's id (UUID)")
	fs.StringVar(&m.Type, "type", "", "message type, e.g. weekly_review")
	fs.StringVar(&m.Key, "key", "", "message catalog key, e.g. engagement.weekly_review.celebration")
	fs.StringVar(&params, "params", "", `message params, a JSON object of strings`)
	fs.StringVar(&m.Destination, "destination", "", "individual or group (default: the profile's routing)")
	fs.StringVar(&m.DestinationJID, "jid", "", "destination JID (default: the profile's routing)")
	fs.StringVar(&scheduledFor, "scheduled-for", "", "when to send, RFC3339 (default: now)")
	fs.StringVar(&m.IdempotencyKey, "idempotency-key", "", "at most 128 characters; a repeated key changes nothing")
	fs.StringVar(&periodStart, "period-start", "", "start of the period the key covers, RFC3339 (e.g. the goodbye's UTC day); stored for verify")
	fs.StringVar(&replayUntil, "replay-until", "", "until when the key could be produced again, RFC3339; cleanup keeps the message until then (default: none: it ages from when it was queued)")
	fs.StringVar(&output, "output", "text", "text or json")
	logs.register(fs)
	return cmd
}
