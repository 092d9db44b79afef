package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// secretAnnotation marks a flag whose value is a secret: a token, or a URL
// that may carry a password.
const secretAnnotation = cliflag.SecretAnnotation

// markSecret registers flag as a secret: Main scrubs its value (given on
// the command line or from the environment) from the error a run ends
// with, and the commands from the errors they log, wherever it appears.
func markSecret(fs *pflag.FlagSet, flag string) { cliflag.MarkSecret(fs, flag) }

// Secrets are a command's secret flags; Scrub reads their values when it
// runs, as given on the command line or from the environment by then.
type Secrets []*pflag.Flag

// SecretsOf collects cmd's secret flags, its parents' persistent ones
// included.
func SecretsOf(cmd *cobra.Command) Secrets {
	var s Secrets
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

// Scrub returns err as one line with every secret's value masked (see
// postgres.Scrub). nil stays nil; the error still unwraps to err, so exit
// codes survive.
func (s Secrets) Scrub(err error) error {
	if err == nil || len(s) == 0 {
		return err
	}
	values := make([]string, 0, len(s))
	for _, f := range s {
		if v := f.Value.String(); v != "" {
			values = append(values, v)
		}
	}
	return postgres.Scrub(err, values...)
}
