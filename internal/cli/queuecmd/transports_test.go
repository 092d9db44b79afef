package queuecmd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// carrierKind is a transport added as docs/development.md, "Adding a
// transport", says, in a test: the transport (here, in this file, as its
// own file in sender/transport would hold it), its kind with its flags and
// its row in transports (internal/cli/queuecmd/transports.go would hold
// them; here queuecmd.WithTransport adds them). Nothing
// else: no edit of the delivery flags, of queue-process or of its help.
var carrierKind = queuecmd.TransportKind{
	Name: "carrier",
	Help: "a test's own receiver, over HTTP",
	Flags: func(fs *pflag.FlagSet) queuecmd.TransportConfig {
		c := &carrierConfig{}
		fs.StringVar(&c.url, "carrier-url", "", "the receiver's URL, for --transport carrier")
		cliflag.BindEnv(fs, "carrier-url", "CARRIER_URL")
		fs.StringVar(&c.token, "carrier-token", "", "the receiver's bearer token")
		cliflag.BindEnv(fs, "carrier-token", "CARRIER_TOKEN")
		cliflag.MarkSecret(fs, "carrier-token")
		return c
	},
}

type carrierConfig struct{ url, token string }

func (c *carrierConfig) Missing() string {
	if c.url == "" {
		return "--carrier-url (or CARRIER_URL)"
	}
	return ""
}

func (c *carrierConfig) Build(io.Writer) (transport.Transport, error) {
	if !strings.HasPrefix(c.url, "http://127.0.0.1:") {
		// A careless transport, whose error shows its token: cli.Main scrubs
		// it, as the flag is marked secret.
		return nil, fmt.Errorf("carrier: %s with token %s is not a loopback receiver", c.url, c.token)
	}
	return &carrier{url: c.url, token: c.token}, nil
}

// carrier POSTs each message's idempotency key to its receiver.
type carrier struct{ url, token string }

func (*carrier) Name() string       { return "carrier" }
func (*carrier) Deduplicates() bool { return true }

func (c *carrier) Send(ctx context.Context, d transport.Delivery) (transport.Result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(d.IdempotencyKey))
	if err != nil {
		return transport.Result{}, &transport.Error{Err: err, Permanent: true}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return transport.Result{}, &transport.Error{Err: errors.New("carrier: no answer"), Unreachable: true}
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return transport.Result{}, &transport.Error{Err: fmt.Errorf("carrier: HTTP %d", resp.StatusCode), Permanent: true, StatusCode: resp.StatusCode}
	}
	return transport.Result{ProviderMessageID: "carrier-" + d.ID}, nil
}

// help is cmd's --help.
func help(t *testing.T, cmd *cobra.Command) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := cli.Main(context.Background(), cmd, []string{"--help"}, cli.Env{Stdout: &stdout, Stderr: &stderr}); code != cli.ExitOK {
		t.Fatalf("%s --help: exit %d: %s", cmd.Name(), code, stderr.String())
	}
	return stdout.String()
}

// The recipe of docs/development.md, "Adding a transport": a kind declared
// with its flags and a row in transports are all queue-process and the
// jobs' queue step need. --help lists the transport and its flags (with
// their variables), --transport picks it, its required flag is checked
// before any work, its secret flag is scrubbed, and it delivers.
func TestATransportIsItsKindAndItsRow(t *testing.T) {
	queuecmd.WithTransport(t, carrierKind)

	queueHelp := help(t, queuecmd.NewCommand())
	listed := slices.ContainsFunc(strings.Split(queueHelp, "\n"), func(line string) bool {
		help, ok := strings.CutPrefix(line, "  carrier ")
		return ok && strings.TrimSpace(help) == carrierKind.Help
	})
	if !listed {
		t.Errorf("queue-process --help does not list the carrier transport with its help:\n%s", queueHelp)
	}
	if !strings.Contains(queueHelp, "webhook, whatsapp-cloud, ") || !strings.Contains(queueHelp, " or carrier (env ENGAGEMENT_TRANSPORT)") {
		t.Errorf("queue-process --help: --transport does not name the carrier:\n%s", queueHelp)
	}
	for _, env := range []string{"(env CARRIER_URL)", "(env CARRIER_TOKEN)"} {
		if !strings.Contains(queueHelp, env) {
			t.Errorf("queue-process --help does not show %s:\n%s", env, queueHelp)
		}
	}
	for _, c := range []struct {
		cmd   *cobra.Command
		group string
	}{{queuecmd.NewCommand(), queuecmd.DeliveryGroup}, {jobcmd.NewDailyCommand(), queuecmd.QueueStepGroup}, {jobcmd.NewWeeklyCommand(), queuecmd.QueueStepGroup}} {
		sections := helpSections(help(t, c.cmd))
		for _, flag := range []string{"carrier-url", "carrier-token"} {
			if !slices.Contains(sections[c.group], flag) {
				t.Errorf("%s --help: --%s is not in the section %q: %v", c.cmd.Name(), flag, c.group, sections[c.group])
			}
		}
	}

	// Its required flag is checked before any work: exit 2, one line. The
	// database URL points at a closed port: reaching it would exit 1.
	const unreachable = "postgres://scheduler@127.0.0.1:1/engagement?connect_timeout=1"
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), queuecmd.NewCommand(), []string{"--database-url", unreachable, "--transport", "carrier"},
		cli.Env{Stdout: &stdout, Stderr: &stderr})
	if code != cli.ExitUsage || !strings.Contains(stderr.String(), "--transport carrier needs --carrier-url (or CARRIER_URL)") {
		t.Errorf("--transport carrier without its URL: exit %d, %q; want %d naming --carrier-url", code, stderr.String(), cli.ExitUsage)
	}
	// Its secret, from the environment, never shows in the error.
	stderr.Reset()
	env := cli.Env{Stderr: &stderr, LookupEnv: cli.MapEnv([]string{"CARRIER_URL=http://example.com/", "CARRIER_TOKEN=tok-3f9a1c"})}
	code = cli.Main(context.Background(), queuecmd.NewCommand(), []string{"--database-url", unreachable, "--transport", "carrier"}, env)
	if code != cli.ExitUsage || strings.Contains(stderr.String(), "tok-3f9a1c") || !strings.Contains(stderr.String(), "is not a loopback receiver") {
		t.Errorf("--transport carrier with a refused URL: exit %d, %q; want %d, the error without the token", code, stderr.String(), cli.ExitUsage)
	}

	// --transport carrier builds it, from its flags: the options a run
	// would get, without running (runF).
	var got *carrier
	cmd := queuecmd.NewCommandRunF(func(tr transport.Transport) error {
		got, _ = tr.(*carrier)
		return nil
	})
	env = cli.Env{LookupEnv: cli.MapEnv([]string{"CARRIER_TOKEN=tok-3f9a1c"}), Stderr: &stderr}
	if code := cli.Main(context.Background(), cmd, []string{"--database-url", unreachable, "--transport", "carrier", "--carrier-url", "http://127.0.0.1:9/in"}, env); code != cli.ExitOK {
		t.Fatalf("queue-process --transport carrier: exit %d: %s", code, stderr.String())
	}
	if got == nil || got.url != "http://127.0.0.1:9/in" || got.token != "tok-3f9a1c" {
		t.Fatalf("--transport carrier built %#v, want the carrier with the flag's URL and the variable's token", got)
	}

	// And it delivers: queue-process through it, on a real database, to a
	// real HTTP receiver.
	var (
		mu   sync.Mutex
		keys []string
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-3f9a1c" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		keys = append(keys, string(body))
		mu.Unlock()
	}))
	defer receiver.Close()
	pool, dbURL := pgtest.NewPool(t)
	fixture.DueReviews(t, pool, 2, "carrier")
	stdout.Reset()
	stderr.Reset()
	env = cli.Env{Stdout: &stdout, Stderr: &stderr, LookupEnv: cli.MapEnv([]string{
		"DATABASE_URL=" + dbURL, "ENGAGEMENT_TRANSPORT=carrier", "CARRIER_URL=" + receiver.URL, "CARRIER_TOKEN=tok-3f9a1c"})}
	code = cli.Main(context.Background(), queuecmd.NewCommand(), []string{"--send-interval", "0"}, env)
	if code != cli.ExitOK || !strings.HasPrefix(stdout.String(), "queue-process via carrier: 2 processed, 2 sent, 0 retried, 0 failed") {
		t.Fatalf("queue-process via the carrier: exit %d, %q (%s); want both messages sent", code, stdout.String(), stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 {
		t.Errorf("the receiver got %v, want the 2 messages' keys", keys)
	}
}

// The transports' flags are a public contract (docs/reference): declared
// beside each transport, they keep the names, variables, defaults and
// secret marks they had in internal/cli, on queue-process and the jobs.
func TestTheTransportFlagsKeepTheirContract(t *testing.T) {
	t.Parallel()
	want := []struct {
		flag, env, def string
		secret         bool
	}{
		{"webhook-url", "ENGAGEMENT_WEBHOOK_URL", "", false},
		{"webhook-secret", "ENGAGEMENT_WEBHOOK_SECRET", "", true},
		{"whatsapp-phone-number-id", "WHATSAPP_PHONE_NUMBER_ID", "", false},
		{"whatsapp-token", "WHATSAPP_ACCESS_TOKEN", "", true},
		{"whatsapp-templates", "WHATSAPP_TEMPLATES", "", false},
		{"whatsapp-base-url", "WHATSAPP_BASE_URL", "", false},
		{"whatsapp-retry-unknown", "", "false", false},
	}
	for _, cmd := range []*cobra.Command{queuecmd.NewCommand(), jobcmd.NewDailyCommand(), jobcmd.NewWeeklyCommand()} {
		secrets := cli.SecretsOf(cmd)
		for _, w := range want {
			f := cmd.Flags().Lookup(w.flag)
			if f == nil {
				t.Errorf("%s has no --%s", cmd.Name(), w.flag)
				continue
			}
			env := ""
			if e := f.Annotations[cliflag.EnvAnnotation]; len(e) > 0 {
				env = e[0]
			}
			if env != w.env || f.DefValue != w.def || slices.Contains(secrets, f) != w.secret {
				t.Errorf("%s --%s: variable %q, default %q, secret %v; want %q, %q, %v",
					cmd.Name(), w.flag, env, f.DefValue, slices.Contains(secrets, f), w.env, w.def, w.secret)
			}
		}
	}
	// --whatsapp-retry-unknown reaches the processor with the Cloud API,
	// as before; the other transports never ask for it.
	templates := t.TempDir() + "/templates.json"
	if err := os.WriteFile(templates, []byte(`{"engagement.goodbye.self_select":{"name":"goodbye_v1","language":{"pt-BR":"pt_BR"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"--transport", "whatsapp-cloud", "--whatsapp-phone-number-id", "123", "--whatsapp-token", "tok", "--whatsapp-templates", templates, "--whatsapp-retry-unknown"}, true},
		{[]string{"--transport", "whatsapp-cloud", "--whatsapp-phone-number-id", "123", "--whatsapp-token", "tok", "--whatsapp-templates", templates}, false},
		{[]string{"--transport", "log", "--whatsapp-retry-unknown"}, false},
	} {
		var f queuecmd.DeliveryFlags
		fs := pflag.NewFlagSet("", pflag.ContinueOnError)
		f.Register(fs, "x")
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.ProcessorConfig(io.Discard)
		if err != nil || cfg.RetryUnknown != c.want {
			t.Errorf("%v: retry unknown %v (%v), want %v", c.args, cfg.RetryUnknown, err, c.want)
		}
	}
}
