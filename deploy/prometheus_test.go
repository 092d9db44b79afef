package deploy_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/engagement-scheduler/engagement/internal/metrics"
	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
)

// The alerting rules (deploy/prometheus/alerts.yml) are checked by the real
// promtool: `promtool check rules` and the unit tests of alerts_test.yml
// (`promtool test rules`), which feed series over time and expect each
// alert to fire, or not, with its labels and annotations.

var (
	promtoolOnce sync.Once
	promtoolPath string
	promtoolErr  error
)

// promtool returns promtool's path, installing Debian's prometheus package
// (which ships it) when it is missing. Installing must not leave a
// Prometheus server running or enabled: localsvc.AptInstall refuses service
// starts during the install and disables the unit afterwards; checked here.
func promtool(t *testing.T) string {
	t.Helper()
	promtoolOnce.Do(func() { promtoolPath, promtoolErr = findOrInstallPromtool() })
	if promtoolErr != nil {
		t.Fatalf("promtool: %v", promtoolErr)
	}
	return promtoolPath
}

func findOrInstallPromtool() (string, error) {
	if p, err := exec.LookPath("promtool"); err == nil {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Test binaries of other packages may install at the same time.
	unlock, err := localsvc.LockFile(ctx, filepath.Join(os.TempDir(), "engagement-promtool.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p, nil
	}
	hint := "install promtool (Debian: apt-get install --no-install-recommends prometheus) or put it on PATH"
	if err := localsvc.AptInstall(ctx, "deploy tests", "prometheus", hint, "prometheus"); err != nil {
		return "", err
	}
	if enabled, _ := filepath.Glob("/etc/systemd/system/*.wants/prometheus.service"); len(enabled) > 0 {
		return "", fmt.Errorf("installing promtool left the prometheus service enabled: %v", enabled)
	}
	if out, err := exec.Command("pgrep", "-x", "prometheus").Output(); err == nil && len(out) > 0 {
		return "", fmt.Errorf("installing promtool left a prometheus server running (pid %s)", strings.TrimSpace(string(out)))
	}
	return exec.LookPath("promtool")
}

func promDir(t *testing.T) string { return filepath.Join(repoRoot(t), "deploy", "prometheus") }

// ruleTests are the promtool unit-test files next to alerts.yml.
var ruleTests = []string{"alerts_test.yml", "alerts_long_test.yml"}

func TestAlertRulesPassPromtoolCheck(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(promtool(t), "check", "rules", filepath.Join(promDir(t), "alerts.yml")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

func TestAlertRulesUnitTests(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(promtool(t), append([]string{"test", "rules"}, ruleTests...)...)
	cmd.Dir = promDir(t)
	if out, err := cmd.CombinedOutput(); err != nil || strings.Count(string(out), "SUCCESS") != len(ruleTests) {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// The unit tests catch a rule that drifts: with the daily threshold moved
// from 26 to 27 hours, or the backlog's for-duration dropped, they fail.
func TestAlertRulesUnitTestsCatchADriftedRule(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile(filepath.Join(promDir(t), "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, drift := range [][2]string{
		{"> 26 * 3600", "> 27 * 3600"},
		{"> 500\n        for: 30m", "> 500\n        for: 1m"},
		{"engagement_verify_ok) == 0", "engagement_verify_ok) < 0"},
	} {
		if !strings.Contains(string(rules), drift[0]) {
			t.Fatalf("alerts.yml no longer contains %q; update this test", drift[0])
		}
		dir := t.TempDir()
		//nolint:gosec // dir is the test's own temporary directory
		if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), []byte(strings.Replace(string(rules), drift[0], drift[1], 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, f := range ruleTests {
			data, err := os.ReadFile(filepath.Join(promDir(t), f))
			if err != nil {
				t.Fatal(err)
			}
			//nolint:gosec // dir is the test's own temporary directory, f one of ruleTests
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(promtool(t), append([]string{"test", "rules"}, ruleTests...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("with %q drifted to %q, promtool test rules still passes:\n%s", drift[0], drift[1], out)
		}
	}
}

// Every metric an alert reads is one the binaries push (a constant of
// package metrics), and every job label an alert names is a binary's or
// verify's Pushgateway job.
func TestAlertRulesUseThePushedMetrics(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(promDir(t), "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	runbookAnchors := headingAnchors(t, filepath.Join(promDir(t), "..", "..", "docs", "runbook.md"))
	pushed := []string{metrics.JobDuration, metrics.JobLastSuccess, metrics.JobLastFailure, metrics.JobLastRunFailed,
		metrics.JobUsers, metrics.JobUsersProcessed, metrics.JobMessages, metrics.DeliveryMessages, metrics.DeliveryRecovered,
		metrics.DeliveryOutage, metrics.QueuePending, metrics.QueueDue, metrics.QueueOldestDueAge, metrics.VerifyOK, metrics.VerifyViolations,
		metrics.DeliveryInvalid, metrics.DedupeChecks, metrics.DedupeCheckErrors, metrics.TransportPaused}
	jobs := append(binaries(t), metrics.VerifyJob)
	metricName := regexp.MustCompile(`\bengagement_[a-z_]+`)
	jobLabel := regexp.MustCompile(`job="([^"]*)"`)
	seen := map[string]bool{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || seen[r.Alert] {
				t.Errorf("group %s: a rule without an alert name, or %q twice", g.Name, r.Alert)
			}
			seen[r.Alert] = true
			names := metricName.FindAllString(r.Expr, -1)
			if len(names) == 0 {
				t.Errorf("%s: expr %q reads no engagement_ metric", r.Alert, r.Expr)
			}
			for _, n := range names {
				if !slices.Contains(pushed, n) {
					t.Errorf("%s: reads %s, which no binary pushes (metrics/metrics.go)", r.Alert, n)
				}
			}
			for _, m := range jobLabel.FindAllStringSubmatch(r.Expr, -1) {
				if !slices.Contains(jobs, m[1]) {
					t.Errorf("%s: job=%q is not a Pushgateway job of the project (%s)", r.Alert, m[1], strings.Join(jobs, ", "))
				}
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: want a severity label and summary and description annotations", r.Alert)
			}
			// Issue 24: the page an operator gets at night says where to
			// look: a runbook section of docs/runbook.md per alert.
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookURL+"#")
			if !ok || !slices.Contains(runbookAnchors, anchor) {
				t.Errorf("%s: runbook_url %q, want %s#<a heading of docs/runbook.md> (%s)", r.Alert, r.Annotations["runbook_url"], runbookURL, strings.ToLower(r.Alert))
			}
		}
	}
	for _, want := range []string{"EngagementJobRunFailed", "EngagementDailyNoRecentSuccess", "EngagementWeeklyNoRecentSuccess",
		"EngagementVerifyBroken", "EngagementQueueBacklog", "EngagementQueueOldestDueMessage", "EngagementReceiverOutage",
		"EngagementDeliveriesFailing", "EngagementUnrenderableMessages", "EngagementJobUsersFailed", "EngagementDuplicateRateHigh",
		"EngagementDedupeCheckFailures", "EngagementTransportPaused"} {
		if !seen[want] {
			t.Errorf("alerts.yml has no %s", want)
		}
	}
}

// runbookURL is where the alerts' runbook_url annotations point.
const runbookURL = "https://github.com/engagement-scheduler/engagement/blob/main/docs/runbook.md"

// headingAnchors returns the GitHub anchors of a Markdown file's headings:
// lower case, spaces to '-', punctuation other than '-' and '_' dropped.
func headingAnchors(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range title {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}
