package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

// options is what each command builds from its flags: Validate checks
// every value before any work (a usage error, exit 2, in one line naming
// the flag) and resolves what the run needs; Run does the work, reading
// nothing but the options.
type options interface {
	bind(stdout, stderr io.Writer, args []string)
	Validate() error
	Run(ctx context.Context) error
}

// cmdIO is what every options value embeds: the streams the command writes
// to and its positional arguments, set when it runs.
type cmdIO struct {
	stdout, stderr io.Writer
	args           []string
}

func (c *cmdIO) bind(stdout, stderr io.Writer, args []string) {
	c.stdout, c.stderr, c.args = stdout, stderr, args
}

// runOptions is the RunE of a command whose work is o: bound to the
// command's streams and arguments, validated, run. Its errors exit 1 unless
// they carry a code (runE).
func runOptions(o options) func(*cobra.Command, []string) error {
	return runE(func(cmd *cobra.Command, args []string) error {
		o.bind(cmd.OutOrStdout(), cmd.ErrOrStderr(), args)
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	})
}
