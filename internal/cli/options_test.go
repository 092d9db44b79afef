package cli

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// refusingDatabase is a database URL whose server closes every connection
// at once, and a count of the connections made to it: a run that tried to
// connect shows there, and fails fast.
func refusingDatabase(t *testing.T) (url string, connections func() int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return "postgres://scheduler:pw@" + ln.Addr().String() + "/engagement?connect_timeout=5&sslmode=disable", n.Load
}

// probeOptions is a command's options that record what the runner did
// with them, in order.
type probeOptions struct {
	CmdIO
	DBOptions
	t       testing.TB // the test, whose fixtures Run reads with
	url     string
	invalid bool

	steps   []string
	app     string        // the connections' application_name, as Run saw it
	runPool *pgxpool.Pool // the pool Run was given
}

func (o *probeOptions) Validate() error {
	o.steps = append(o.steps, "validate")
	if o.invalid {
		return Usagef("--invalid was given")
	}
	return RequireDatabaseURL(o.url)
}

func (o *probeOptions) Around(ctx context.Context, run func(context.Context) error) error {
	o.steps = append(o.steps, "around")
	err := run(ctx)
	if err != nil {
		o.steps = append(o.steps, "around saw: "+err.Error())
	}
	return err
}

func (o *probeOptions) Run(context.Context) error {
	o.steps = append(o.steps, "run")
	o.runPool = o.Pool
	o.app = fixture.Setting(o.t, o.Pool, "application_name")
	return nil
}

func newProbeCommand(o *probeOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "probe", Args: cobra.NoArgs, RunE: RunOptions(o, nil)}
	RegisterDatabaseURL(cmd.Flags(), &o.url)
	cmd.Flags().BoolVar(&o.invalid, "invalid", false, "fail Validate")
	o.DBURL = &o.url
	return cmd
}

// The runner opens and checks the database once, after Validate and before
// Run, for options that embed DBOptions: Run gets the pool, its
// connections named after the binary, and it is closed once Run returns. A
// usage error never connects; a database that does not open never reaches
// Run, and the options' wrapper sees its error.
func TestTheRunnerOpensTheDatabaseBetweenValidateAndRun(t *testing.T) {
	t.Parallel()
	_, dbURL := pgtest.NewPool(t)
	o := &probeOptions{t: t}
	var stderr bytes.Buffer
	if code := Main(context.Background(), newProbeCommand(o), []string{"--database-url", dbURL}, Env{Stderr: &stderr}); code != ExitOK {
		t.Fatalf("probe: exit %d: %s", code, stderr.String())
	}
	if want := []string{"validate", "around", "run"}; !slices.Equal(o.steps, want) {
		t.Errorf("steps %q, want %q", o.steps, want)
	}
	if o.app != "probe" {
		t.Errorf("the pool's application_name is %q, want the binary's name, probe", o.app)
	}
	if o.runPool == nil || o.runPool.Ping(context.Background()) == nil {
		t.Errorf("the pool Run was given is still open after the run (or there was none: %v)", o.runPool == nil)
	}

	refusing, connections := refusingDatabase(t)
	o = &probeOptions{t: t}
	stderr.Reset()
	code := Main(context.Background(), newProbeCommand(o), []string{"--database-url", refusing, "--invalid"}, Env{Stderr: &stderr})
	if code != ExitUsage || connections() != 0 || !slices.Equal(o.steps, []string{"validate"}) {
		t.Errorf("probe --invalid: exit %d, %d connections, steps %q (%s); want %d, none, validate only",
			code, connections(), o.steps, stderr.String(), ExitUsage)
	}

	o = &probeOptions{t: t}
	stderr.Reset()
	code = Main(context.Background(), newProbeCommand(o), []string{"--database-url", refusing}, Env{Stderr: &stderr})
	if code != ExitFatal || connections() == 0 || len(o.steps) != 3 || !strings.HasPrefix(o.steps[2], "around saw: connect to database") ||
		strings.Count(stderr.String(), "\n") != 1 || strings.Contains(stderr.String(), ":pw@") {
		t.Errorf("probe on a database that closes connections: exit %d, %d connections, steps %q, stderr %q; want %d, a connection tried, Run never called, the wrapper seeing the error, one line without the password",
			code, connections(), o.steps, stderr.String(), ExitFatal)
	}
}
