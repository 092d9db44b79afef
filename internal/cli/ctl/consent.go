package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/erase"
	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// userFlags are what opt-out, opt-in and erase share.
type userFlags struct {
	cli.DBOptions
	userID string
	output string
	logs   cli.LogFlags

	log zerolog.Logger // set by validate
}

func (f *userFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.userID, "user-id", "", "the user (UUID, user_profiles.user_id); required")
	fs.StringVar(&f.output, "output", "text", "text or json")
	f.logs.Register(fs)
}

// validate checks the shared flags, normalises the user id and makes the
// audit logger.
func (f *userFlags) validate(stderr io.Writer) error {
	if err := cli.RequireDatabaseURL(*f.DBURL); err != nil {
		return err
	}
	if err := cli.ValidateOutput(f.output); err != nil {
		return err
	}
	if strings.TrimSpace(f.userID) == "" {
		return cli.Usagef("--user-id is required")
	}
	id, ok := postgres.ParseUUID(strings.TrimSpace(f.userID))
	if !ok {
		return cli.Usagef("--user-id %q is not a UUID", f.userID)
	}
	f.userID = id
	var err error
	f.log, err = f.logs.Logger(stderr, "engagementctl")
	return err
}

// defaultActor is who an opt-out, opt-in or erase by engagementctl is
// recorded as when neither --actor nor USER names anyone.
const defaultActor = "operator"

// registerActor registers --actor, which falls back to $USER (the
// operator's login), then to defaultActor.
func registerActor(cmd *cobra.Command, actor *string, usage string) {
	fs := cmd.Flags()
	fs.StringVar(actor, "actor", "", usage+` (default $USER, else "operator")`)
	cliflag.BindEnv(fs, "actor", "USER")
}

// consentOptions is one engagementctl opt-out or opt-in.
type consentOptions struct {
	cli.CmdIO
	userFlags
	optOut, confirm bool
	source, actor   string
	at              string    // --at, as given
	said            time.Time // --at parsed; zero: now
}

func newConsentCommand(databaseURL *string, optOut bool, runF func(*consentOptions) error) *cobra.Command {
	o := &consentOptions{userFlags: userFlags{DBOptions: cli.DBOptions{DBURL: databaseURL}}, optOut: optOut}
	use, short, long := "opt-in", "Opt a user back in to re-engagement messages",
		`Records that the user wants re-engagement messages again
(engagement_opt_in): user_profiles.reengagement_opt_out becomes false and a
row of engagement_consent_events records the change, its source and actor.
Nothing cancelled is requeued. A user already opted in is left as they are
and nothing is recorded (exit 0, "already opted in").`
	if optOut {
		use, short, long = "opt-out", "Opt a user out of re-engagement messages (and cancel what waits for them)",
			`Records that the user does not want re-engagement messages
(engagement_opt_out): user_profiles.reengagement_opt_out becomes true, a row
of engagement_consent_events records the change, its source and actor, and
the user's pending messages are cancelled (opted_out) in the same
statement; one whose send had already started may still go. A user already
opted out is left as they are and nothing is recorded (exit 0, "already
opted out").

With --confirm, the change also queues the user's confirmation (the
catalog's engagement.opt_out.confirmation, message kind
opt_out_confirmation), which queue-process sends while they stay opted out.
See docs/consent.md, "What to tell the user".`
	}
	long += `

The user's consent follows the newest of their wishes by when they said
it, whatever order they are recorded in (docs/consent.md, "Consent in the
user's time"). An operator's call is said now, unless --at says when the
user said it (a request by e-mail or a support ticket, recorded later);
one older than a wish the user made later (at the same instant, an opt-in
is older than an opt-out) changes nothing and is recorded in the consent
history as superseded (exit 0, "superseded").

Exit 0 with one line (--output json: {"user_id","opted_out","changed"},
and "superseded": true for a superseded call); 2 for a --user-id that is
not a UUID, an empty --source, an --at that is not an RFC 3339 instant or
is before 2000 or more than 5 minutes ahead of the database clock, or a
user without a profile (user_profiles) in the database; 1 when the
database fails. See docs/operations.md, "Consent".`
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE:  cli.RunOptions(o, runF),
	}
	o.userFlags.register(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.source, "source", activity.SourceEngagementctl, "the consent event's source: the door the user's wish came through (1 to 200 characters)")
	registerActor(cmd, &o.actor, "the operator recorded with the event")
	fs.StringVar(&o.at, "at", "", "when the user said it (RFC 3339, like 2026-11-28T14:05:00Z); default now")
	if optOut {
		fs.BoolVar(&o.confirm, "confirm", false, "queue the opt-out's confirmation message to the user (docs/consent.md)")
	}
	return cmd
}

func (o *consentOptions) Validate() error {
	o.source, o.actor = strings.TrimSpace(o.source), strings.TrimSpace(o.actor)
	if o.source == "" || len(o.source) > 200 {
		return cli.Usagef("--source must be 1 to 200 characters, like %s", activity.SourceEngagementctl)
	}
	if o.actor == "" {
		o.actor = defaultActor
	}
	if len(o.actor) > 200 {
		return cli.Usagef("--actor must be at most 200 characters")
	}
	var err error
	if o.said, err = parseInstant("--at", o.at); err != nil {
		return err
	}
	return o.userFlags.validate(o.Stderr)
}

func (o *consentOptions) Run(ctx context.Context) error {
	name := map[bool]string{true: "opt-out", false: "opt-in"}[o.optOut]
	out, err := activity.Consent(ctx, o.Pool, o.userID, o.optOut, o.source,
		activity.ConsentOptions{At: o.said, Actor: o.actor, Confirm: o.confirm})
	switch {
	case errors.Is(err, activity.ErrUnknownUser), errors.Is(err, activity.ErrNoSource):
		return cli.UsageError(err)
	case errors.Is(err, activity.ErrInstantOutOfRange):
		return cli.Usagef("--at %s is before 2000 or more than 5 minutes ahead of the database clock", o.said.Format(time.RFC3339))
	case err != nil:
		return err
	}
	changed, superseded := out == activity.ConsentChanged, out == activity.ConsentSuperseded
	o.log.Info().Str("command", name).Str("user_id", o.userID).Str("source", o.source).Str("actor", o.actor).
		Str("outcome", string(out)).Msg("consent recorded")
	if o.output == "json" {
		return json.NewEncoder(o.Stdout).Encode(struct {
			UserID     string `json:"user_id"`
			OptedOut   bool   `json:"opted_out"`
			Changed    bool   `json:"changed"`
			Superseded bool   `json:"superseded,omitempty"`
		}{o.userID, o.optOut, changed, superseded})
	}
	state := map[bool]string{true: "opted out", false: "opted in"}[o.optOut]
	line := fmt.Sprintf("%s %s", o.userID, state)
	switch {
	case superseded:
		line = fmt.Sprintf("%s not %s: superseded by a wish the user made later; recorded as superseded, nothing changed", o.userID, state)
	case !changed:
		line = fmt.Sprintf("%s already %s: nothing changed", o.userID, state)
	}
	_, err = fmt.Fprintln(o.Stdout, line)
	return err
}

// eraseOptions is one engagementctl erase.
type eraseOptions struct {
	cli.CmdIO
	userFlags
	yes   bool
	actor string
}

func newEraseCommand(databaseURL *string, runF func(*eraseOptions) error) *cobra.Command {
	o := &eraseOptions{userFlags: userFlags{DBOptions: cli.DBOptions{DBURL: databaseURL}}}
	cmd := &cobra.Command{
		Use:   "erase",
		Short: "Erase a user's WhatsApp id and message contents from the scheduler (LGPD), and opt them out",
		Long: `Removes, in one transaction, every trace of the user's WhatsApp id and of
their messages' contents from what the scheduler keeps (its engagement_*
tables and the queue), and opts the user out (source "erase") so that
nothing is sent to them afterwards. Their queue rows are kept, scrubbed
(no JID, params, error text or provider id; pending and in-flight ones
cancelled), so the funnel's counts stay right; the send budget's hashes of
their JIDs are replaced by random ids; the bot's request keys of the user
are deleted; console audit rows naming them keep only action, actor, count
and user id; job runs and dedupe keys holding one of their JIDs lose that
value. The user id (a UUID) stays, with the consent history: it is what
keeps them opted out. The bot's own tables (user_profiles, transactions)
are the bot's to erase.

Without --yes: exit 2, nothing changed. Exit 0 with one line (--output json:
the counts per table); 2 for a --user-id that is not a UUID or that no table
knows; 1 when the database fails (nothing changed). Running it again is
harmless. See docs/operations.md, "Erase".`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	o.userFlags.register(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&o.yes, "yes", false, "confirm: the erase cannot be undone")
	registerActor(cmd, &o.actor, "the operator recorded with the opt-out")
	return cmd
}

func (o *eraseOptions) Validate() error {
	if o.actor = strings.TrimSpace(o.actor); o.actor == "" {
		o.actor = defaultActor
	}
	if len(o.actor) > 200 {
		return cli.Usagef("--actor must be at most 200 characters")
	}
	if err := o.userFlags.validate(o.Stderr); err != nil {
		return err
	}
	if !o.yes {
		return cli.Usagef("erase cannot be undone: add --yes to erase user %s", o.userID)
	}
	return nil
}

func (o *eraseOptions) Run(ctx context.Context) error {
	rep, err := erase.EraseWith(ctx, o.Pool, o.userID, erase.Options{Actor: o.actor})
	switch {
	case errors.Is(err, erase.ErrUnknownUser), errors.Is(err, erase.ErrBadUserID):
		return cli.UsageError(err)
	case err != nil:
		return err
	}
	o.log.Info().Str("command", "erase").Str("user_id", rep.UserID).Str("actor", o.actor).
		Int64("messages", rep.Messages).Bool("opted_out", rep.OptedOut).Msg("user erased")
	if o.output == "json" {
		return json.NewEncoder(o.Stdout).Encode(rep)
	}
	_, err = fmt.Fprintf(o.Stdout, "erased %s: %d messages scrubbed (%d cancelled), %d ledger rows, %d budget rows, "+
		"%d request keys, %d dedupe keys, %d audit rows, %d job runs; %s\n",
		rep.UserID, rep.Messages, rep.Cancelled, rep.Ledger, rep.BudgetRecipients+rep.BudgetClaims, rep.FireRequests,
		rep.IdempotencyKeys, rep.ConsoleAudit, rep.JobRuns, optedOutNote(rep))
	return err
}

func optedOutNote(rep erase.Report) string {
	switch {
	case !rep.Profile:
		return "no profile (nothing can be sent to them)"
	case rep.OptedOut:
		return "opted out"
	default:
		return "already opted out"
	}
}
