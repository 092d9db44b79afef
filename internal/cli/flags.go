package cli

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/cliflag"
)

// envAnnotation names the environment variable a flag falls back to.
const envAnnotation = cliflag.EnvAnnotation

// bindEnv makes flag fall back to the environment variable env when it is not
// given on the command line (the flag wins), and says so in --help. The
// variable's value never appears in the help text.
func bindEnv(fs *pflag.FlagSet, flag, env string) { cliflag.BindEnv(fs, flag, env) }

// applyEnv fills every flag of cmd that was not set on the command line from
// its environment variable, if lookup finds it set. Main does it for the
// command it runs, before the command's RunE: the commands read the
// environment through their flags only.
func applyEnv(cmd *cobra.Command, lookup func(string) (string, bool)) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		envs := f.Annotations[envAnnotation]
		if err != nil || f.Changed || len(envs) == 0 {
			return
		}
		v, ok := lookup(envs[0])
		if !ok || v == "" {
			return
		}
		if setErr := f.Value.Set(v); setErr != nil {
			err = Usagef("invalid %s: %v", envs[0], setErr)
		}
	})
	return err
}

// RegisterDatabaseURL adds --database-url (DATABASE_URL), a secret, to fs.
func RegisterDatabaseURL(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "database-url", "", "PostgreSQL URL, e.g. postgres://user@host:5432/db")
	bindEnv(fs, "database-url", "DATABASE_URL")
	markSecret(fs, "database-url")
}

// RequireDatabaseURL checks that a database URL is given and parses, so a
// malformed one is a configuration error (exit 2, which a cron platform
// need not retry) found before any work. The message never shows the
// password.
func RequireDatabaseURL(u string) error {
	if strings.TrimSpace(u) == "" {
		return Usagef("no database: set DATABASE_URL or pass --database-url")
	}
	if _, err := pgx.ParseConfig(u); err != nil {
		return UsageError(fmt.Errorf("invalid database URL: %w", err))
	}
	return nil
}

func ValidateOutput(o string) error {
	if o != "text" && o != "json" {
		return Usagef("--output must be text or json, got %q", o)
	}
	return nil
}

// MaxAsOfSkew is how far ahead of the database clock --as-of may be
// without --allow-future-as-of: clock skew between hosts, not a date.
const MaxAsOfSkew = 5 * time.Minute

// minAsOf is the earliest --as-of accepted. Anything before it is a typo or
// a zero value (0001-01-01T00:00:00Z is Go's zero time, which would silently
// mean "the database clock"), never a day anyone wants to re-run.
var minAsOf = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// parseAsOf parses an RFC3339 instant no earlier than 2000-01-01; the job
// works in UTC. name is how the error names the input (the flag, and its
// environment variable where it has one).
func parseAsOf(name, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, Usagef("%s %q is not an RFC3339 instant (like 2026-11-22T06:00:00Z)", name, s)
	}
	if t.Before(minAsOf) {
		return time.Time{}, Usagef("%s %q is before %s; give the instant to treat as now (like 2026-11-22T06:00:00Z)", name, s, minAsOf.Format("2006-01-02"))
	}
	return t.UTC(), nil
}

// AsOfValue is an --as-of flag: an RFC3339 instant no earlier than
// 2000-01-01, kept in UTC. Unset, it is the zero time, which every command
// reads as "the database clock" (postgres.AsOf). A value that does not
// parse is kept and reported by Check, from the command's validation: the
// rest of the command line is read first, so that --output json still
// shapes the error.
type AsOfValue struct {
	Name string // how errors name it: "--as-of", or with its variable
	t    time.Time
	err  error
}

func (v *AsOfValue) Set(s string) error {
	v.t, v.err = parseAsOf(cmp.Or(v.Name, "--as-of"), s)
	return nil
}

func (v *AsOfValue) String() string {
	if v.t.IsZero() {
		return ""
	}
	return v.t.Format(time.RFC3339Nano)
}

func (v *AsOfValue) Type() string { return "string" }

// Check is the usage error of a value that did not parse, else nil.
func (v *AsOfValue) Check() error { return v.err }

// Time is the instant given, or the zero time for none.
func (v *AsOfValue) Time() time.Time { return v.t }
