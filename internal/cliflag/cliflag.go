// Package cliflag annotates the binaries' flags with what package cli does
// with them beyond parsing: the environment variable a flag falls back to,
// and whether its value is a secret. Package cli declares most flags and
// reads the annotations (it applies the environment before a command runs
// and scrubs secrets from the error a run ends with); the transports'
// own flags, declared with their kinds in internal/cli/queuecmd, are
// annotated with the same two functions, so cli treats them as its own.
package cliflag

import (
	"fmt"

	"github.com/spf13/pflag"
)

// Annotation keys of a flag (pflag.Flag.Annotations).
const (
	// EnvAnnotation names the environment variable a flag falls back to.
	EnvAnnotation = "engagement_env"
	// SecretAnnotation marks a flag whose value is a secret: a token, or a
	// URL that may carry a password.
	SecretAnnotation = "engagement_secret"
)

// BindEnv makes flag fall back to the environment variable env when it is
// not given on the command line (the flag wins), and says so in --help. The
// variable's value never appears in the help text. flag must be defined.
func BindEnv(fs *pflag.FlagSet, flag, env string) {
	f := fs.Lookup(flag)
	f.Usage += fmt.Sprintf(" (env %s)", env)
	_ = fs.SetAnnotation(flag, EnvAnnotation, []string{env})
}

// MarkSecret registers flag as a secret: package cli scrubs its value
// (given on the command line or from the environment) from the error a run
// ends with, and the commands from the errors they log, wherever it
// appears.
func MarkSecret(fs *pflag.FlagSet, flag string) {
	_ = fs.SetAnnotation(flag, SecretAnnotation, []string{"true"})
}
