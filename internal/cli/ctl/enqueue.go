package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/sender"
)

// enqueueOptions is one engagementctl enqueue.
type enqueueOptions struct {
	cli.CmdIO
	cli.DBOptions
	req    sender.Request
	params string // req.Params, as the flag gives it
	output string
	logs   cli.LogFlags

	m sender.Message // set by Validate

	log zerolog.Logger // set by Validate
}

func newEnqueueCommand(databaseURL *string, runF func(*enqueueOptions) error) *cobra.Command {
	o := &enqueueOptions{DBOptions: cli.DBOptions{DBURL: databaseURL}}
	cmd := &cobra.Command{
		Use:   "enqueue",
		Short: "Queue one message, idempotently when given a key",
		Long: `Queues one message. With --idempotency-key (trimmed; at most 128
characters, no control characters such as CR, LF or tab inside), the first
call creates the message and every later call with that key returns the
same id with "created": false and changes nothing, also under concurrent
callers. A key that breaks the rule is refused (exit 2, nothing written):
queue-process could not send it. Without a key every call creates a
message. --destination and --jid default to the user's profile routing.

A message the rule of every door does not let go is refused (exit 2,
nothing written), naming why: "erased" (the user was erased), "opted_out"
(a marketing message to a user who opted out: every type that is not a
shipped kind is marketing unless declared otherwise with engagementctl
categories), "holdout" (a goodbye to a user held out of the current cycle),
"confirmation_without_opt_out" (an opt-out's confirmation: only
engagement_opt_out queues one). See docs/consent.md.

What a message may hold (sender.Message.Validate; POST /api/messages the
same): --type 1 to 64 lowercase letters, digits, _ . -, starting with a
letter; --key up to 128 letters, digits, _ . -; --params at most 32, names
of letters, digits and _, values up to 1,024 characters; --jid as Baileys
writes it: <phone number>@s.whatsapp.net, <lid>@lid or <group id>@g.us;
--scheduled-for, --period-start and --replay-until from 2000-01-01 to 400
days ahead. Anything else is exit 2, nothing written.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	fs := cmd.Flags()
	fs.StringVar(&o.req.UserID, "user-id", "", "the user's id (UUID)")
	fs.StringVar(&o.req.Type, "type", "", "message type, e.g. weekly_review (a-z, 0-9, _ . -; at most 64)")
	fs.StringVar(&o.req.Key, "key", "", "message catalog key, e.g. engagement.weekly_review.celebration")
	fs.StringVar(&o.params, "params", "", `message params, a JSON object of strings`)
	fs.StringVar(&o.req.Destination, "destination", "", "individual or group (default: the profile's routing)")
	fs.StringVar(&o.req.JID, "jid", "", "destination JID: <phone>@s.whatsapp.net, <lid>@lid or <group>@g.us (default: the profile's routing)")
	fs.StringVar(&o.req.ScheduledFor, "scheduled-for", "", "when to send, RFC3339 (default: now)")
	fs.StringVar(&o.req.IdempotencyKey, "idempotency-key", "", "at most 128 characters, no control characters; a repeated key changes nothing")
	fs.StringVar(&o.req.PeriodStart, "period-start", "", "start of the period the key covers, RFC3339 (e.g. the goodbye's UTC day); stored for verify")
	fs.StringVar(&o.req.ReplayUntil, "replay-until", "", "until when the key could be produced again, RFC3339; cleanup keeps the message until then (default: none: it ages from when it was queued)")
	fs.StringVar(&o.output, "output", "text", "text or json")
	o.logs.Register(fs)
	return cmd
}

// Validate checks every flag and builds the message.
func (o *enqueueOptions) Validate() error {
	if err := cli.RequireDatabaseURL(*o.DBURL); err != nil {
		return err
	}
	if err := cli.ValidateOutput(o.output); err != nil {
		return err
	}
	o.req.Params = json.RawMessage(o.params)
	var err error
	if o.log, err = o.logs.Logger(o.Stderr, "engagementctl"); err != nil {
		return err
	}
	// The checks the console's POST /api/messages makes, too.
	if o.m, err = o.req.Message(); err != nil {
		var fe *sender.FieldError
		if errors.As(err, &fe) {
			return cli.Usagef("--%s: %s", strings.ReplaceAll(fe.Field, "_", "-"), fe.Problem)
		}
		return cli.UsageError(err)
	}
	return nil
}

func (o *enqueueOptions) Run(ctx context.Context) error {
	q, err := sender.Enqueue(ctx, o.Pool, o.m)
	switch {
	case errors.Is(err, sender.ErrNoDestination), errors.Is(err, sender.ErrNoCatalogKey),
		errors.Is(err, sender.ErrRefused):
		return cli.UsageError(err)
	case err != nil:
		return err
	}
	if q.PayloadDiffers {
		o.log.Warn().Str("idempotency_key", o.m.IdempotencyKey).Str("message_id", q.ID).
			Msg("idempotency key replayed with a different payload; the first message stands")
	}
	if o.output == "json" {
		return json.NewEncoder(o.Stdout).Encode(struct {
			ID      string `json:"id"`
			Created bool   `json:"created"`
		}{q.ID, !q.Duplicate})
	}
	verb := "queued"
	if q.Duplicate {
		verb = "already queued under this key"
	}
	_, err = fmt.Fprintf(o.Stdout, "%s %s\n", q.ID, verb)
	return err
}
