package main_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 24, point 1: sslmode=verify-full "against the system's CAs" fails
// on Supabase, whose servers are signed by Supabase's own root CA. The
// documented fix (docs/deploy.md, "Railway with Supabase") is the CA's file
// in deploy/certs/, copied into the image at /etc/engagement/certs/, named
// by sslrootcert in the URL. A cluster of the test's own, signed by a CA
// of the test's own, stands in for Supabase: with sslrootcert the binaries
// verify the server and work; without it they fail with one line that
// says the certificate is the problem.
func TestVerifyFullWithTheProvidersRootCA(t *testing.T) {
	t.Parallel()
	c := pgtest.NewCluster(t)
	caFile := c.EnableTLS(t)
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "localhost:" + u.Port() // the name the certificate is for
	withCA, withoutCA := *u, *u
	withCA.RawQuery = url.Values{"sslmode": {"verify-full"}, "sslrootcert": {caFile}}.Encode()
	withoutCA.RawQuery = url.Values{"sslmode": {"verify-full"}}.Encode()

	res := cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+withCA.String()), "status", "--output", "json")
	if res.Code != 0 {
		t.Errorf("status over verify-full with sslrootcert: exit %d: %s", res.Code, res.Stderr)
	}
	res = cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+withCA.String()), "migrate", "up")
	if res.Code != 0 {
		t.Errorf("migrate up over verify-full with sslrootcert: exit %d: %s", res.Code, res.Stderr)
	}

	res = cmdtest.Exec(t, ctl.NewCommand, cmdtest.Env("DATABASE_URL="+withoutCA.String()), "status")
	lines := cmdtest.Lines(res.Stderr)
	if res.Code != 1 || len(lines) != 1 || !strings.Contains(cmdtest.Message(lines[0]), "certificate") || !strings.Contains(lines[0], "sslrootcert") {
		t.Errorf("status over verify-full without the CA: exit %d, stderr %q; want exit 1 and one line naming the certificate and sslrootcert", res.Code, res.Stderr)
	}
}
