package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Whatever a command's error says, the secrets its flags hold (given on the
// command line or through the environment) do not leave Main: a token
// anywhere, a URL's password where it travels as a credential. The exit
// code the error carries survives.
func TestMainScrubsEverySecretFlag(t *testing.T) {
	t.Parallel()
	newCmd := func() *cobra.Command {
		var token, dsn, plain string
		cmd := &cobra.Command{
			Use: "secretive",
			RunE: func(*cobra.Command, []string) error {
				return UsageError(errors.New("refused " + token + " at " + dsn + " for " + plain))
			},
		}
		fs := cmd.Flags()
		fs.StringVar(&token, "token", "", "")
		bindEnv(fs, "token", "SECRETIVE_TOKEN")
		markSecret(fs, "token")
		fs.StringVar(&dsn, "database-url", "", "")
		markSecret(fs, "database-url")
		fs.StringVar(&plain, "name", "", "")
		return cmd
	}
	var stderr bytes.Buffer
	code := Main(context.Background(), newCmd(),
		[]string{"--database-url", "postgres://app:hunter2hunter2@db:5432/x", "--name", "visible-name"},
		Env{Stderr: &stderr, LookupEnv: MapEnv([]string{"SECRETIVE_TOKEN=tok_3f9a8b7c6d5e"})})
	got := stderr.String()
	if code != ExitUsage {
		t.Errorf("exit %d, want %d", code, ExitUsage)
	}
	for _, secret := range []string{"tok_3f9a8b7c6d5e", "hunter2hunter2"} {
		if strings.Contains(got, secret) {
			t.Errorf("stderr %q shows the secret %q", got, secret)
		}
	}
	if !strings.Contains(got, "visible-name") || !strings.Contains(got, "app:xxxxx@db") {
		t.Errorf("stderr %q: want the rest of the message, the password masked", got)
	}
}
