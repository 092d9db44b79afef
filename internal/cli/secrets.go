package cli

import (
	"errors"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// secretAnnotation marks a flag whose value is a secret: a token, or a URL
// that may carry a password.
const secretAnnotation = "engagement_secret"

// minSecretLength is the shortest token scrubbed as a bare substring:
// replacing every "a" of a one-letter secret would garble the message and
// hide nothing.
const minSecretLength = 8

// markSecret registers flag as a secret: Main scrubs its value (given on
// the command line or from the environment) from the error a run ends
// with, and the commands from the errors they log, wherever it appears.
func markSecret(fs *pflag.FlagSet, flag string) {
	_ = fs.SetAnnotation(flag, secretAnnotation, []string{"true"})
}

// secrets are a command's secret flags; scrub reads their values when it
// runs, as given on the command line or from the environment by then.
type secrets []*pflag.Flag

// secretsOf collects cmd's secret flags, its parents' persistent ones
// included.
func secretsOf(cmd *cobra.Command) secrets {
	var s secrets
	seen := map[*pflag.Flag]bool{}
	visit := func(f *pflag.Flag) {
		if !seen[f] && len(f.Annotations[secretAnnotation]) > 0 {
			s = append(s, f)
		}
		seen[f] = true
	}
	for c := cmd; c != nil; c = c.Parent() {
		c.Flags().VisitAll(visit)
		c.PersistentFlags().VisitAll(visit)
	}
	return s
}

// scrub returns err as one line with every secret masked: a URL's or
// connection string's password where it travels as a credential (see
// postgres.Redact), a token wherever it appears. nil stays nil; the error
// still unwraps to err, so exit codes survive.
func (s secrets) scrub(err error) error {
	if err == nil || len(s) == 0 {
		return err
	}
	msg := err.Error()
	for _, f := range s {
		v := f.Value.String()
		if v == "" {
			continue
		}
		msg = postgres.Redact(errors.New(msg), v).Error()
		if _, perr := url.Parse(v); perr == nil && strings.Contains(v, "://") {
			continue // a URL: its password is the secret, masked above
		}
		if len(v) >= minSecretLength {
			msg = strings.ReplaceAll(msg, v, "xxxxx")
		}
	}
	return &scrubbedError{msg: msg, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
