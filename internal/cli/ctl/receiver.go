package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// receiverOptions is one engagementctl check-receiver.
type receiverOptions struct {
	cli.CmdIO
	url, secret, output string
	timeout             time.Duration
}

// newCheckReceiverCommand builds engagementctl check-receiver, which never
// connects to the database; runF, when not nil, replaces the run (see
// cli.RunOptions).
func newCheckReceiverCommand(runF func(*receiverOptions) error) *cobra.Command {
	o := &receiverOptions{}
	cmd := &cobra.Command{
		Use:   "check-receiver",
		Short: "Check that the bot's webhook checks signatures, takes a fresh Idempotency-Key as new and drops a repeated one; exit 4 when it does not",
		Long: `Sends a probe to the webhook three times: with a wrong signature (the
receiver must refuse it with a 4xx), signed under a fresh Idempotency-Key
(it must answer 2xx and take it as new: an answer that calls it a repeat,
with Idempotent-Replayed: true or {"duplicate":true}, fails the check, since
queue-process records a replayed answer as sent), and signed again under the
same key (it must answer 2xx with Idempotent-Replayed: true, or
{"duplicate":true}: it dropped the repeat). Exactly once through the webhook
rests on those two answers: after a crash, queue-process may send a message
again under its same key, and a receiver that calls every message a repeat
sends nothing while every message is marked sent.

The probe is a webhook request like any message's, marked with the header
X-Engagement-Probe: 1 and message_type "probe", with no JID: a receiver that
follows docs/receiver.md de-duplicates and answers it but sends nothing to
WhatsApp. Prints one line (--output json: one JSON object), which says why
each failed check failed. Exits 0 when every check holds, 4 when the
receiver answered but a check failed, 1 when it did not answer, 2 on bad
flags. Needs no database.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	fs := cmd.Flags()
	fs.StringVar(&o.url, "webhook-url", "", "the bot's endpoint")
	cliflag.BindEnv(fs, "webhook-url", "ENGAGEMENT_WEBHOOK_URL")
	fs.StringVar(&o.secret, "webhook-secret", "", "the HMAC-SHA256 key queue-process signs with")
	cliflag.BindEnv(fs, "webhook-secret", "ENGAGEMENT_WEBHOOK_SECRET")
	cliflag.MarkSecret(fs, "webhook-secret")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long each probe may wait for its answer")
	fs.StringVar(&o.output, "output", "text", "report format on stdout: text or json")
	return cmd
}

func (o *receiverOptions) Validate() error {
	if err := cli.ValidateOutput(o.output); err != nil {
		return err
	}
	if strings.TrimSpace(o.url) == "" {
		return cli.Usagef("--webhook-url (or ENGAGEMENT_WEBHOOK_URL) is required")
	}
	if o.secret == "" {
		return cli.Usagef("--webhook-secret (or ENGAGEMENT_WEBHOOK_SECRET) is required: without it the probe cannot check the signature")
	}
	if o.timeout <= 0 {
		return cli.Usagef("--timeout must be positive, like 10s")
	}
	return nil
}

// Run probes the receiver and prints the report: exit 4 when it answered
// but a check failed, 1 when it did not answer.
func (o *receiverOptions) Run(ctx context.Context) error {
	rep, err := transport.CheckReceiver(ctx, o.url, o.secret, o.timeout)
	if err != nil && !errors.Is(err, transport.ErrUnreachable) {
		return cli.UsageError(err)
	}
	if err != nil {
		rep.Error = err.Error()
	}
	if o.output == "json" {
		if err := json.NewEncoder(o.Stdout).Encode(rep); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
	} else {
		fmt.Fprintln(o.Stdout, receiverLine(rep))
	}
	switch {
	case err != nil:
		return err
	case !rep.OK:
		return &cli.ExitError{Code: cli.ExitInvariant, Err: fmt.Errorf("check-receiver: %s", receiverLine(rep))}
	}
	return nil
}

// receiverLine is the report in one line: the verdict, each check, the
// statuses, and why each failed check failed.
func receiverLine(r transport.ProbeReport) string {
	word := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	verdict := "ok"
	switch {
	case r.Error != "":
		verdict = "UNREACHABLE"
	case !r.OK:
		verdict = "FAILED"
	}
	line := fmt.Sprintf("receiver %s: %s (signature checked: %s, answered: %s, taken as new: %s, repeat dropped: %s; HTTP %d, %d, %d)",
		r.Host, verdict, word(r.SignatureChecked), word(r.Answered), word(r.TakenAsNew), word(r.RepeatDropped), r.Statuses[0], r.Statuses[1], r.Statuses[2])
	if len(r.Problems) > 0 {
		line += ": " + strings.Join(r.Problems, "; ")
	}
	return line
}
