package main_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// writeFile writes body to a file of the test's and returns its path.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// variantsCatalog gives the goodbye two copy variants: a, the embedded
// text, and b, a short one, in both embedded locales.
const variantsCatalog = `{
  "$variants": {"goodbye": {"a": "engagement.goodbye.self_select", "b": "engagement.goodbye.short"}},
  "engagement.goodbye.short": {"pt-BR": "Oi! Sentimos sua falta. Responda 1, 2 ou 3.", "en": "Hi! We miss you. Reply 1, 2 or 3."}
}`

// Issue 45: copy variants through the binaries. 400 users due a goodbye,
// the daily job run with a catalog of two goodbye variants and a 10 %
// holdout: every treated user's goodbye is the variant the user id's hash
// picks (computed here in Go), its key queued and its name recorded on the
// message and on the log row; the held-out users have neither; each
// variant gets about half. queue-process with the same catalog sends every
// goodbye, and engagementctl funnel reports the treated arm per variant.
func TestVariantsAreRecordedAndReported(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	const users = 400
	fixture.InactiveUsers(t, pool, users, lastWeekOfOctober)
	catalog := writeFile(t, "catalog.json", variantsCatalog)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_CATALOG="+catalog)
	res := cmdtest.Run(t, binary(t), env, "--as-of", asOf, "--holdout-percent", "10")
	if res.Code != 0 {
		t.Fatalf("engagement-daily: exit %d: %s", res.Code, res.Stderr)
	}

	type row struct {
		User              string
		Held              bool
		Logged, Queued, K string
	}
	var got []row
	for _, v := range fixture.GoodbyeVariants(t, pool) {
		got = append(got, row{User: v.UserID, Held: v.Holdout, Logged: v.Logged, Queued: v.Queued, K: v.MessageKey})
	}
	keys := map[string]string{"a": "engagement.goodbye.self_select", "b": "engagement.goodbye.short"}
	perVariant := map[string]int{}
	for _, r := range got {
		want := []string{"a", "b"}[bucket("variant:goodbye", r.User)%2]
		switch {
		case r.Held && (r.Logged != "" || r.Queued != "" || r.K != ""):
			t.Errorf("held-out %s: variant %q logged, %q queued with key %q; want none", r.User, r.Logged, r.Queued, r.K)
		case !r.Held && (r.Logged != want || r.Queued != want || r.K != keys[want]):
			t.Errorf("%s: variant %q logged, %q queued with key %q; want %q and %q", r.User, r.Logged, r.Queued, r.K, want, keys[want])
		case !r.Held:
			perVariant[want]++
		}
	}
	treated := perVariant["a"] + perVariant["b"]
	if len(got) != users || treated < 300 {
		t.Fatalf("%d goodbyes logged, %d treated; want %d, about 360", len(got), treated, users)
	}
	// Binomial(treated, 1/2): 5 standard deviations either side.
	if d := math.Abs(float64(perVariant["a"]) - float64(treated)/2); d > 5*math.Sqrt(float64(treated)/4) {
		t.Errorf("variants %v of %d treated, want about half each", perVariant, treated)
	}

	q := cmdtest.Exec(t, queuecmd.NewCommand, env, "--transport", "log", "--send-interval", "0", "--output", "json")
	var sent delivery.ProcessSummary
	if err := json.Unmarshal([]byte(q.Stdout), &sent); q.Code != 0 || err != nil || sent.Sent != treated {
		t.Fatalf("queue-process: exit %d, %v, sent %d; want the %d goodbyes: %s", q.Code, err, sent.Sent, treated, q.Stderr)
	}

	// The report, read as of 40 days after the goodbyes were logged.
	later := fixture.Now(t, pool).Add(40 * 24 * time.Hour).UTC().Format(time.RFC3339)
	f := cmdtest.Exec(t, ctl.NewCommand, env, "funnel", "--output", "json", "--as-of", later, "--weeks", "8")
	var rep struct {
		Cohorts []struct {
			Variants []struct {
				Name  string
				Users int
			}
		}
		Variants []struct {
			Name  string
			Users int
		}
	}
	if err := json.Unmarshal([]byte(f.Stdout), &rep); f.Code != 0 || err != nil || len(rep.Cohorts) != 1 {
		t.Fatalf("funnel: exit %d, %v: %s%s", f.Code, err, f.Stdout, f.Stderr)
	}
	for _, vs := range [][]struct {
		Name  string
		Users int
	}{rep.Cohorts[0].Variants, rep.Variants} {
		if len(vs) != 2 || vs[0].Name != "a" || vs[0].Users != perVariant["a"] || vs[1].Name != "b" || vs[1].Users != perVariant["b"] {
			t.Errorf("funnel variants %+v, want a %d and b %d", vs, perVariant["a"], perVariant["b"])
		}
	}
	text := cmdtest.Exec(t, ctl.NewCommand, env, "funnel", "--as-of", later, "--weeks", "8")
	if !strings.Contains(text.Stdout, "variant a") || !strings.Contains(text.Stdout, "variant b") {
		t.Errorf("funnel text lists no variants:\n%s", text.Stdout)
	}
}

// Issue 45's bad input, through the binaries: a variant naming a key the
// catalog lacks, a catalog whose variants do not cover every locale, and a
// Cloud API template file without a variant's template are each exit 2
// with one line saying what, before any work.
func TestBadVariantsAreUsageErrors(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	missing := writeFile(t, "missing.json", `{"$variants": {"goodbye": {"a": "engagement.goodbye.self_select", "b": "engagement.goodbye.gone"}}}`)
	short := writeFile(t, "short.json", `{"$variants": {"goodbye": {"a": "engagement.goodbye.self_select", "b": "k"}}, "k": {"pt-BR": "1, 2 ou 3?"}}`)
	good := writeFile(t, "good.json", variantsCatalog)
	templates := writeFile(t, "templates.json", `{"engagement.goodbye.self_select": {"name": "goodbye_v1", "language": {"pt-BR": "pt_BR"}}}`)
	cloud := []string{"ENGAGEMENT_TRANSPORT=whatsapp-cloud", "WHATSAPP_PHONE_NUMBER_ID=1234567890", "WHATSAPP_ACCESS_TOKEN=tok",
		"WHATSAPP_TEMPLATES=" + templates}
	daily, queue := binary(t), cmdtest.Build(t, "./cmd/queue-process")
	for _, c := range []struct {
		name, bin string
		env       []string
		want      string
	}{
		{"daily, a variant naming a missing key", daily, []string{"ENGAGEMENT_CATALOG=" + missing},
			`variant "b" names message key "engagement.goodbye.gone", which the catalog does not have`},
		{"daily, a variant short of a locale", daily, []string{"ENGAGEMENT_CATALOG=" + short},
			`variant "b" (key "k") has no en template`},
		{"queue-process, a variant short of a locale", queue, []string{"ENGAGEMENT_CATALOG=" + short, "ENGAGEMENT_TRANSPORT=log"},
			`every variant must cover every locale`},
		{"queue-process, no template for a variant", queue, append([]string{"ENGAGEMENT_CATALOG=" + good}, cloud...),
			`no template for "engagement.goodbye.short", a copy variant`},
		{"daily's queue step, no template for a variant", daily, append([]string{"ENGAGEMENT_CATALOG=" + good}, cloud...),
			`no template for "engagement.goodbye.short", a copy variant`},
	} {
		res := cmdtest.Run(t, c.bin, cmdtest.Env(append([]string{"DATABASE_URL=" + url}, c.env...)...), "--as-of", asOf)
		lines := cmdtest.Lines(res.Stderr)
		if res.Code != 2 || len(lines) != 1 || !strings.Contains(cmdtest.Message(lines[0]), c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line saying %q", c.name, res.Code, res.Stderr, c.want)
		}
	}
}
