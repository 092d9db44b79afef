package deploy_test

import (
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/cli/consolecmd"
	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/cli/queuecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// commands builds each binary's cobra command, as its main does.
var commands = map[string]func() *cobra.Command{
	"engagement-daily":   jobcmd.NewDailyCommand,
	"engagement-weekly":  jobcmd.NewWeeklyCommand,
	"queue-process":      queuecmd.NewCommand,
	"engagementctl":      ctl.NewCommand,
	"engagement-console": consolecmd.NewCommand,
}

// The documented schedules (UTC). queue-process is checked for a sensible
// frequency instead (see TestSchedules).
var wantSchedules = map[string]string{
	"engagement-daily":  "0 6 * * *",
	"engagement-weekly": "0 9 * * 1",
}

// scheduledBinaries are the binaries cron runs; engagementctl is run by hand
// or once per release, and on a schedule for cleanup only.
var scheduledBinaries = []string{"engagement-daily", "engagement-weekly", "queue-process"}

// cleanupService is the scheduled service that runs engagementctl cleanup,
// so the queue and the send ledger stop growing (issue 24).
const cleanupService = "engagement-cleanup"

// scheduledServices are the cron services every platform runs, by name: a
// scheduled binary under its own name, and cleanupService.
var scheduledServices = append(slices.Clone(scheduledBinaries), cleanupService)

// consoleBinary is the one long-running service: a web server over the
// database, not a run that ends. No platform schedules it; they keep it up
// (a Kubernetes Deployment, a Railway service without a cron schedule) and
// check it on consoleHealthPath.
const consoleBinary = "engagement-console"

// consoleHealthPath answers 200 while the database answers (503 otherwise)
// and needs no authentication, so probes and healthchecks can call it.
const consoleHealthPath = "/healthz"

// longRunningServices are the services that run until stopped, by name.
var longRunningServices = []string{consoleBinary}

// serviceOf names the service a command line runs: the binary's name, or
// cleanupService for engagementctl cleanup ("" for any other engagementctl
// command, which has no business on a schedule).
func serviceOf(binary string, args []string) string {
	if binary != "engagementctl" {
		return binary
	}
	if len(args) > 0 && args[0] == "cleanup" {
		return cleanupService
	}
	return ""
}

// delivers reports whether a binary can send messages, so waking hours
// apply to it.
func delivers(binary string) bool { return slices.Contains(scheduledBinaries, binary) }

// secretEnv are the variables that carry credentials (a password in a URL,
// a signing key, a token): they come from a Secret, never a literal value.
var secretEnv = []string{"DATABASE_URL", "ENGAGEMENT_WEBHOOK_URL", "ENGAGEMENT_WEBHOOK_SECRET",
	"WHATSAPP_ACCESS_TOKEN", "ENGAGEMENT_DEDUPE_STORE", "PUSHGATEWAY_URL"}

// secretFlags are the flags that would carry those values on the command
// line, where `kubectl describe` and the process list show them.
var secretFlags = []string{"database-url", "webhook-url", "webhook-secret", "whatsapp-token", "dedupe-store", "pushgateway-url"}

// The user the image runs as (distroless's nonroot) and the pods run as.
const nonrootUID = 65532

// minMemoryLimit: the jobs stay well under 150 MB RSS; a limit below this
// would OOM-kill a healthy run.
const minMemoryLimit = 192 << 20

// TestMain removes the binaries the tests build (cmdtest.Build).
func TestMain(m *testing.M) { cmdtest.Main(m) }

func TestEveryBinaryHasItsCommand(t *testing.T) {
	t.Parallel()
	bins := binaries(t)
	for _, bin := range bins {
		build, ok := commands[bin]
		if !ok {
			t.Errorf("cmd/%s has no entry in commands: add its cli constructor so manifests that run it are checked", bin)
			continue
		}
		if got := build().Name(); got != bin {
			t.Errorf("the command for cmd/%s is named %q", bin, got)
		}
		// The built binary is that command: the same --help, flag for flag.
		res := cmdtest.Run(t, cmdtest.Build(t, "./cmd/"+bin), nil, "--help")
		if want := cmdtest.Exec(t, build, nil, "--help").Stdout; res.Code != 0 || res.Stdout != want {
			t.Errorf("cmd/%s --help (exit %d) differs from its cli command's: the flag checks would test the wrong command\n%s",
				bin, res.Code, res.Stdout)
		}
	}
	for bin := range commands {
		if !slices.Contains(bins, bin) {
			t.Errorf("commands lists %s, which is not a directory under cmd/", bin)
		}
	}
}

// checkInvocation checks that binary accepts args and reads every variable
// in env, by building the binary's real command and parsing args with it
// (subcommands like `migrate up` included).
func checkInvocation(t *testing.T, where, binary string, args, env []string) {
	t.Helper()
	build, ok := commands[binary]
	if !ok {
		if bins := binaries(t); slices.Contains(bins, binary) {
			t.Errorf("%s runs %s, whose arguments cannot be checked: add its cli constructor to commands", where, binary)
		} else {
			t.Errorf("%s runs %q, which is not a binary under cmd/ (%s)", where, binary, strings.Join(bins, ", "))
		}
		return
	}
	for _, a := range args {
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") {
			t.Errorf("%s: %q: spell flags out (--name) in manifests", where, a)
		}
	}
	root := build()
	cmd, rest, err := root.Find(args)
	if err != nil {
		t.Errorf("%s: %s %s: %v", where, binary, strings.Join(args, " "), err)
		return
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("%s: %s does not take %s: %v", where, cmd.CommandPath(), strings.Join(rest, " "), err)
		return
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		t.Errorf("%s: %s: %v", where, cmd.CommandPath(), err)
	}
	if cmd == root && root.HasSubCommands() {
		t.Errorf("%s: %s needs a subcommand", where, binary)
	}
	bound := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if e := flagEnv(f); e != "" {
			bound[e] = true
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	for _, e := range env {
		if !bound[e] {
			t.Errorf("%s: sets %s, but no flag of %s falls back to it", where, e, cmd.CommandPath())
		}
	}
}

// schedulePeriod parses expr as a standard 5-field cron expression and
// returns the shortest time between two runs over a year.
func schedulePeriod(t *testing.T, where, expr string) (time.Duration, bool) {
	t.Helper()
	if n := len(strings.Fields(expr)); n != 5 {
		t.Errorf("%s: schedule %q has %d fields, want the standard 5 (minute hour day month weekday)", where, expr, n)
		return 0, false
	}
	if strings.Contains(expr, "TZ=") {
		t.Errorf("%s: schedule %q sets a time zone; schedules are UTC (Kubernetes: spec.timeZone)", where, expr)
		return 0, false
	}
	s, err := cron.ParseStandard(expr)
	if err != nil {
		t.Errorf("%s: schedule %q does not parse: %v", where, expr, err)
		return 0, false
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := s.Next(start)
	shortest := time.Duration(0)
	for i := 0; i < 5000 && prev.Before(start.AddDate(1, 0, 0)); i++ {
		next := s.Next(prev)
		if gap := next.Sub(prev); shortest == 0 || gap < shortest {
			shortest = gap
		}
		prev = next
	}
	if shortest == 0 {
		t.Errorf("%s: schedule %q fires at most once a year", where, expr)
		return 0, false
	}
	return shortest, true
}

func TestSchedulePeriod(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]time.Duration{"0 6 * * *": 24 * time.Hour, "0 9 * * 1": 7 * 24 * time.Hour,
		"*/5 * * * *": 5 * time.Minute, "0 6,18 * * *": 12 * time.Hour} {
		if got, ok := schedulePeriod(t, "test", expr); !ok || got != want {
			t.Errorf("schedulePeriod(%q) = %v, want %v", expr, got, want)
		}
	}
}

// checkSchedule checks a job's schedule is the documented one (daily,
// weekly) or a sensible delivery frequency (queue-process), and returns its
// period.
func checkSchedule(t *testing.T, where, binary, expr string) (time.Duration, bool) {
	t.Helper()
	period, ok := schedulePeriod(t, where, expr)
	if !ok {
		return 0, false
	}
	if want, ok := wantSchedules[binary]; ok && expr != want {
		t.Errorf("%s: %s runs at %q, want %q (UTC)", where, binary, expr, want)
	}
	if binary == "queue-process" && (period < 5*time.Minute || period > 15*time.Minute) {
		t.Errorf("%s: queue-process runs every %v; want every 5 to 15 minutes, so a due message waits at most that long", where, period)
	}
	return period, true
}

func TestRailwaySchedules(t *testing.T) {
	t.Parallel()
	rc := loadRailway(t)
	seen := map[string]bool{}
	for i, j := range rc.Jobs {
		where := fmt.Sprintf("railway.cron.yml jobs[%d] (%s)", i, j.Name)
		fields := strings.Fields(j.Command)
		if len(fields) == 0 {
			t.Errorf("%s: no command", where)
			continue
		}
		if strings.ContainsAny(j.Command, `"'$&|;<>*\`+"`") {
			t.Errorf("%s: command %q needs a shell; the image has none and Railway runs the start command as is", where, j.Command)
		}
		binary, args := fields[0], fields[1:]
		service := serviceOf(binary, args)
		if slices.Contains(longRunningServices, service) {
			t.Errorf("%s: %s is a long-running service, not a cron job: deploy/railway/%s.json configures it", where, service, service)
			continue
		}
		if j.Name != service {
			t.Errorf("%s: named %q but runs %q; name each service after its binary (engagementctl cleanup: %s)", where, j.Name, binary, cleanupService)
		}
		if seen[service] {
			t.Errorf("%s: %s is scheduled twice", where, service)
		}
		seen[service] = true
		checkInvocation(t, where, binary, args, nil)
		if delivers(binary) {
			checkWakingHours(t, where, args, nil)
		}
		if v, _ := argValue(args, "output"); v != "json" {
			t.Errorf("%s: want --output json, so every run prints one JSON summary line", where)
		}
		period, ok := checkSchedule(t, where, binary, j.Schedule)
		if !ok {
			continue
		}
		if v, ok := argValue(args, "max-duration"); ok {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d+30*time.Second > period {
				t.Errorf("%s: --max-duration %s with a run every %v: the run must stop claiming at least 30 s before the next is due", where, v, period)
			}
		} else if binary == "queue-process" {
			t.Errorf("%s: queue-process without --max-duration drains the whole queue and can run into the next schedule", where)
		}
	}
	for _, service := range scheduledServices {
		if !seen[service] {
			t.Errorf("railway.cron.yml does not schedule %s", service)
		}
	}
}

func TestKubernetesCronJobs(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	seen := map[string]bool{}
	railway := map[string]string{}
	for _, j := range loadRailway(t).Jobs {
		railway[j.Name] = j.Schedule
	}
	for _, w := range m.workloads {
		if w.cronSpec == nil {
			continue
		}
		if len(w.job.Template.Spec.Containers) != 1 || len(w.job.Template.Spec.Containers[0].Command) != 1 {
			continue // TestKubernetesPods reports it
		}
		c := w.job.Template.Spec.Containers[0]
		binary := path.Base(c.Command[0])
		seen[serviceOf(binary, c.Args)] = true
		s := w.cronSpec
		period, ok := checkSchedule(t, w.String(), binary, s.Schedule)
		if !ok {
			continue
		}
		if binary == "queue-process" && railway[binary] != s.Schedule {
			t.Errorf("%s: queue-process runs at %q here and %q on Railway; keep them the same", w, s.Schedule, railway[binary])
		}
		if s.TimeZone == nil || *s.TimeZone != "Etc/UTC" {
			t.Errorf("%s: timeZone %v, want Etc/UTC (the jobs' days and weeks are UTC)", w, deref(s.TimeZone))
		}
		if s.ConcurrencyPolicy != "Forbid" {
			t.Errorf("%s: concurrencyPolicy %q, want Forbid", w, s.ConcurrencyPolicy)
		}
		if s.Suspend != nil && *s.Suspend {
			t.Errorf("%s: suspended", w)
		}
		// Below 10 s the controller, which checks every 10 s, may never
		// start the job; beyond the period a late run collides with the next.
		if d := s.StartingDeadlineSeconds; d == nil || *d < 10 || time.Duration(*d)*time.Second >= period {
			t.Errorf("%s: startingDeadlineSeconds %v, want from 10 s to less than the period (%v)", w, deref(d), period)
		}
		if s.SuccessfulJobsHistoryLimit == nil || s.FailedJobsHistoryLimit == nil || *s.FailedJobsHistoryLimit < 1 {
			t.Errorf("%s: set successfulJobsHistoryLimit and failedJobsHistoryLimit (at least 1 failed job kept)", w)
		}
		// A stuck run must be over, grace period included, before the next is due.
		grace := int64(30)
		if g := w.job.Template.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
		if a := w.job.ActiveDeadlineSeconds; a != nil && time.Duration(*a+grace)*time.Second > period {
			t.Errorf("%s: activeDeadlineSeconds %d + grace %d s exceeds the period %v", w, *a, grace, period)
		}
		if ttl := w.job.TTLSecondsAfterFinished; ttl != nil && time.Duration(*ttl)*time.Second < period {
			t.Errorf("%s: ttlSecondsAfterFinished %d s deletes a run before the next one starts (every %v)", w, *ttl, period)
		}
		if v, ok := argValue(c.Args, "max-duration"); ok {
			d, err := time.ParseDuration(v)
			if a := w.job.ActiveDeadlineSeconds; err != nil || a == nil || d+10*time.Second > time.Duration(*a)*time.Second {
				t.Errorf("%s: --max-duration %s must end claiming (plus a 10 s send) within activeDeadlineSeconds %v", w, v, deref(a))
			}
		} else if binary == "queue-process" {
			t.Errorf("%s: queue-process without --max-duration drains the whole queue and is killed by the deadline", w)
		}
	}
	for _, service := range scheduledServices {
		if !seen[service] {
			t.Errorf("deploy/k8s has no CronJob running %s", service)
		}
	}
}

func TestKubernetesPods(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	if len(m.workloads) == 0 {
		t.Fatal("deploy/k8s holds no CronJob or Job")
	}
	migrates := false
	for _, w := range m.workloads {
		j := w.job
		if j.BackoffLimit == nil || *j.BackoffLimit < 0 || *j.BackoffLimit > 10 {
			t.Errorf("%s: backoffLimit %v, want 0 to 10", w, deref(j.BackoffLimit))
		}
		if j.ActiveDeadlineSeconds == nil || *j.ActiveDeadlineSeconds <= 0 {
			t.Errorf("%s: set activeDeadlineSeconds, so a stuck run ends", w)
		}
		if j.TTLSecondsAfterFinished == nil {
			t.Errorf("%s: set ttlSecondsAfterFinished, so finished Jobs do not pile up", w)
		}
		pod := j.Template.Spec
		if pod.RestartPolicy != "Never" && pod.RestartPolicy != "OnFailure" {
			t.Errorf("%s: restartPolicy %q, want Never or OnFailure", w, pod.RestartPolicy)
		}
		if j.PodFailurePolicy != nil && pod.RestartPolicy != "Never" {
			t.Errorf("%s: podFailurePolicy needs restartPolicy Never", w)
		}
		c, binary, ok := checkPod(t, w.String(), pod)
		if !ok {
			continue
		}
		where := fmt.Sprintf("%s container %s", w, c.Name)
		if j.PodFailurePolicy != nil {
			for _, r := range j.PodFailurePolicy.Rules {
				if r.OnExitCodes != nil && r.OnExitCodes.ContainerName != "" && r.OnExitCodes.ContainerName != c.Name {
					t.Errorf("%s: podFailurePolicy names container %q", where, r.OnExitCodes.ContainerName)
				}
			}
		}
		if slices.Contains(longRunningServices, binary) {
			t.Errorf("%s: %s is a long-running service; a %s would kill it at its deadline: run it from a Deployment", where, binary, w.kind)
		}
		if binary == "engagementctl" && slices.Equal(c.Args, []string{"migrate", "up"}) {
			migrates = true
		}
		checkSharding(t, w, binary, c.Args)
	}
	if !migrates {
		t.Error("deploy/k8s has no Job running engagementctl migrate up")
	}
}

// checkPod checks what every pod template shares, a run's or the
// console's: one container of the project's image, its binary under cmd/
// with arguments and variables the real command takes, credentials from
// the Secret, the restricted Pod Security Standard and sane resources. It
// returns the container and its binary; false when there is no single
// container naming its binary.
func checkPod(t *testing.T, what string, pod podSpec) (container, string, bool) {
	t.Helper()
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: set automountServiceAccountToken: false; the binaries never call the Kubernetes API", what)
	}
	if len(pod.Containers) != 1 {
		t.Errorf("%s: %d containers, want one", what, len(pod.Containers))
		return container{}, "", false
	}
	c := pod.Containers[0]
	where := fmt.Sprintf("%s container %s", what, c.Name)
	if repo, _, _ := strings.Cut(c.Image, ":"); repo != "engagement-scheduler" {
		t.Errorf("%s: image %q, want engagement-scheduler:<tag> (kustomization.yaml's images sets registry and tag)", where, c.Image)
	}
	if len(c.Command) != 1 {
		t.Errorf("%s: command %q, want exactly the binary (its arguments go in args)", where, c.Command)
		return c, "", false
	}
	binary := path.Base(c.Command[0])
	if serviceOf(binary, c.Args) != "" && slices.Contains(scheduledServices, serviceOf(binary, c.Args)) {
		if v, _ := argValue(c.Args, "output"); v != "json" {
			t.Errorf("%s: want --output json, so every run prints one JSON summary line", where)
		}
	}
	var env []string
	values := map[string]string{}
	for _, e := range c.Env {
		env = append(env, e.Name)
		if e.Value != nil {
			values[e.Name] = *e.Value
		}
	}
	checkInvocation(t, where, binary, c.Args, env)
	if delivers(binary) {
		checkWakingHours(t, where, c.Args, values)
	}
	checkSecrets(t, where, c)
	checkSecurity(t, where, pod.SecurityContext, c.SecurityContext)
	checkResources(t, where, c.Resources)
	return c, binary, true
}

func checkSecrets(t *testing.T, where string, c container) {
	t.Helper()
	hasDatabase := false
	for _, e := range c.Env {
		if e.Value != nil && strings.Contains(*e.Value, "://") && strings.Contains(*e.Value, "@") {
			t.Errorf("%s: %s holds a URL with credentials; take it from the Secret", where, e.Name)
		}
		if !slices.Contains(secretEnv, e.Name) {
			continue
		}
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s: %s must come from a Secret (valueFrom.secretKeyRef), not a literal or a ConfigMap", where, e.Name)
			continue
		}
		if e.Name == "DATABASE_URL" {
			hasDatabase = true
			if o := e.ValueFrom.SecretKeyRef.Optional; o != nil && *o {
				t.Errorf("%s: DATABASE_URL is optional; without it the run can only fail", where)
			}
		}
	}
	for _, ef := range c.EnvFrom {
		if ef.SecretRef != nil {
			hasDatabase = true // the whole Secret, DATABASE_URL included
		}
	}
	if !hasDatabase {
		t.Errorf("%s: no DATABASE_URL from the Secret", where)
	}
	for _, f := range secretFlags {
		if _, ok := argValue(c.Args, f); ok {
			t.Errorf("%s: --%s in args shows its value to anyone who can read the Job; use its variable from the Secret", where, f)
		}
	}
}

func checkSecurity(t *testing.T, where string, pod *podSecurityContext, c *containerSecurityContext) {
	t.Helper()
	if pod == nil {
		pod = &podSecurityContext{}
	}
	if c == nil {
		t.Errorf("%s: no securityContext", where)
		return
	}
	nonRoot, uid, seccomp := pod.RunAsNonRoot, pod.RunAsUser, pod.SeccompProfile
	if c.RunAsNonRoot != nil {
		nonRoot = c.RunAsNonRoot
	}
	if c.RunAsUser != nil {
		uid = c.RunAsUser
	}
	if c.SeccompProfile != nil {
		seccomp = c.SeccompProfile
	}
	if nonRoot == nil || !*nonRoot {
		t.Errorf("%s: runAsNonRoot is not true", where)
	}
	if uid == nil || *uid != nonrootUID {
		t.Errorf("%s: runAsUser %v, want %d (the image's nonroot user)", where, deref(uid), nonrootUID)
	}
	if seccomp == nil || seccomp.Type != "RuntimeDefault" {
		t.Errorf("%s: want seccompProfile RuntimeDefault", where)
	}
	if c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		t.Errorf("%s: want allowPrivilegeEscalation: false", where)
	}
	if c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem {
		t.Errorf("%s: want readOnlyRootFilesystem: true (the binaries write nothing to disk)", where)
	}
	if c.Capabilities == nil || !slices.Contains(c.Capabilities.Drop, "ALL") || len(c.Capabilities.Add) > 0 {
		t.Errorf("%s: want capabilities drop [ALL] and none added", where)
	}
}

func checkResources(t *testing.T, where string, r resources) {
	t.Helper()
	for _, name := range []string{"cpu", "memory"} {
		req, ok := r.Requests[name]
		if !ok {
			t.Errorf("%s: no %s request", where, name)
			continue
		}
		reqV, err := parseQuantity(req)
		if err != nil || reqV <= 0 {
			t.Errorf("%s: %s request %q is not a positive quantity", where, name, req)
			continue
		}
		lim, ok := r.Limits[name]
		if !ok {
			if name == "memory" {
				t.Errorf("%s: no memory limit", where)
			}
			continue
		}
		limV, err := parseQuantity(lim)
		if err != nil || limV < reqV {
			t.Errorf("%s: %s limit %q is below the request %q", where, name, lim, req)
		}
		if name == "memory" && limV < minMemoryLimit {
			t.Errorf("%s: memory limit %s is too tight: runs reach about 150 MB RSS", where, lim)
		}
	}
}

// checkSharding checks an Indexed Job runs one shard per index, and that a
// plain Job does not ask for JOB_COMPLETION_INDEX it will never get.
func checkSharding(t *testing.T, w workload, binary string, args []string) {
	t.Helper()
	shards, hasShards := argValue(args, "shards")
	if _, ok := argValue(args, "shard"); ok && w.job.CompletionMode == "Indexed" {
		t.Errorf("%s: --shard i/N gives every pod the same shard; an Indexed Job takes --shards N", w)
	}
	if w.job.CompletionMode != "Indexed" {
		if hasShards {
			t.Errorf("%s: --shards reads JOB_COMPLETION_INDEX, which only an Indexed Job sets", w)
		}
		if c := w.job.Completions; c != nil && *c != 1 {
			t.Errorf("%s: completions %d without completionMode Indexed runs the same work %d times", w, *c, *c)
		}
		return
	}
	if binary != "engagement-daily" && binary != "engagement-weekly" {
		t.Errorf("%s: %s is not sharded; only the daily and weekly jobs take --shards", w, binary)
	}
	c, p := w.job.Completions, w.job.Parallelism
	if c == nil || p == nil || *c < 2 || *c != *p {
		t.Errorf("%s: an Indexed Job wants completions = parallelism ≥ 2, got %v and %v", w, deref(c), deref(p))
		return
	}
	if n, err := strconv.Atoi(shards); !hasShards || err != nil || n != int(*c) {
		t.Errorf("%s: --shards %q, want %d (= completions: one shard per index)", w, shards, *c)
	}
}

func TestShardedDailyJobExists(t *testing.T) {
	t.Parallel()
	for _, w := range loadManifests(t).workloads {
		if w.cronSpec != nil && w.job.CompletionMode == "Indexed" && len(w.job.Template.Spec.Containers) == 1 &&
			slices.Equal(w.job.Template.Spec.Containers[0].Command, []string{"engagement-daily"}) {
			return
		}
	}
	t.Error("deploy/k8s has no CronJob running engagement-daily as an Indexed Job")
}

// htpasswdLine is one bcrypt entry of an htpasswd file, the only kind the
// console accepts (htpasswd -nbB prints one).
var htpasswdLine = regexp.MustCompile(`^[^:\s]+:\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$`)

// htpasswdUsers returns the users of an htpasswd file, false when a line
// is not a bcrypt entry.
func htpasswdUsers(file string) ([]string, bool) {
	var users []string
	for _, line := range strings.Split(strings.TrimSuffix(file, "\n"), "\n") {
		if !htpasswdLine.MatchString(line) {
			return nil, false
		}
		user, _, _ := strings.Cut(line, ":")
		users = append(users, user)
	}
	return users, len(users) > 0
}

func TestSecretExample(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	examples := m.secrets["secret.example.yaml"]
	if len(examples) == 0 {
		t.Fatal("secret.example.yaml defines no Secret")
	}
	for file, ss := range m.secrets {
		if file != "secret.example.yaml" {
			t.Errorf("k8s/%s defines %d Secret(s); only secret.example.yaml may, with placeholders, outside kustomization.yaml", file, len(ss))
		}
	}
	byName := map[string]secret{}
	for _, ex := range examples {
		name := ex.Metadata.Name
		if _, dup := byName[name]; dup {
			t.Errorf("secret.example.yaml defines Secret %s twice", name)
		}
		byName[name] = ex
		if len(ex.Data) > 0 {
			t.Errorf("secret.example.yaml: Secret %s: use stringData, readable placeholders, not base64 data", name)
		}
		for k, v := range ex.StringData {
			// A bcrypt hash cannot say it is a placeholder; the file's
			// comment gives its password (CHANGE-ME).
			if _, ok := htpasswdUsers(v); ok {
				continue
			}
			if !strings.Contains(v, "example") && !strings.Contains(v, "CHANGE-ME") {
				t.Errorf("secret.example.yaml: %s %s = %q does not look like a placeholder (say example or CHANGE-ME)", name, k, v)
			}
		}
	}
	names := slices.Sorted(maps.Keys(byName))
	// Every Secret a pod reads, and every key, is in the example: what
	// someone copies from it is all the manifests need.
	for where, pod := range m.pods() {
		for _, c := range pod.Containers {
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				ex, ok := byName[ref.Name]
				if !ok {
					t.Errorf("%s: %s comes from Secret %q; the example defines %s", where, e.Name, ref.Name, strings.Join(names, ", "))
					continue
				}
				if _, ok := ex.StringData[ref.Key]; !ok {
					t.Errorf("%s: %s reads key %q, which secret.example.yaml's %s does not show", where, e.Name, ref.Key, ref.Name)
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil {
					if _, ok := byName[ef.SecretRef.Name]; !ok {
						t.Errorf("%s: envFrom Secret %q; the example defines %s", where, ef.SecretRef.Name, strings.Join(names, ", "))
					}
				}
			}
		}
		for _, v := range pod.Volumes {
			if v.Secret == nil {
				continue
			}
			ex, ok := byName[v.Secret.SecretName]
			if !ok {
				t.Errorf("%s: volume %s mounts Secret %q; the example defines %s", where, v.Name, v.Secret.SecretName, strings.Join(names, ", "))
				continue
			}
			for _, item := range v.Secret.Items {
				if _, ok := ex.StringData[item.Key]; !ok {
					t.Errorf("%s: volume %s reads key %q, which secret.example.yaml's %s does not show", where, v.Name, item.Key, v.Secret.SecretName)
				}
			}
		}
	}
}

// TestConsoleManifest: the console, the one long-running service, is a
// Deployment (kept up and rolled on a new image, never killed at a
// deadline) behind a ClusterIP Service, reachable on the pod's address,
// authenticated, probed on its health endpoint, and under the same
// restricted Pod Security Standard as the jobs.
func TestConsoleManifest(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	consoles := 0
	selected := map[string]bool{} // Services that select a Deployment's pods
	for _, srv := range m.servers {
		spec := srv.spec
		pod := spec.Template.Spec
		// checkPod holds the binary to cmd/ and its arguments to its command.
		c, binary, ok := checkPod(t, srv.String(), pod)
		if !ok {
			continue
		}
		where := fmt.Sprintf("%s container %s", srv, c.Name)
		if !slices.Contains(longRunningServices, binary) {
			t.Errorf("%s: %s ends when its run is done, and a Deployment would start it again for ever: make it a CronJob", where, binary)
			continue
		}
		if binary == consoleBinary {
			consoles++
		}
		if spec.Replicas == nil || *spec.Replicas < 1 {
			t.Errorf("%s: replicas %v, want at least 1 (set it: 0 runs no console)", srv, deref(spec.Replicas))
		}
		labels := spec.Template.Metadata.Labels
		if len(spec.Selector.MatchLabels) == 0 || !selects(spec.Selector.MatchLabels, labels) {
			t.Errorf("%s: selector %v does not select the template's labels %v", srv, spec.Selector.MatchLabels, labels)
		}
		if pod.RestartPolicy != "" && pod.RestartPolicy != "Always" {
			t.Errorf("%s: restartPolicy %q; a Deployment's pods restart Always", srv, pod.RestartPolicy)
		}

		// It listens on the pod's address: the kubelet and the Service do
		// not reach its loopback. Without --listen it would take
		// 127.0.0.1:8080.
		port := 0
		if v, ok := argValue(c.Args, "listen"); !ok {
			t.Errorf("%s: no --listen: the console would listen on loopback only, out of the probes' and the Service's reach", where)
		} else if host, p, err := net.SplitHostPort(v); err != nil {
			t.Errorf("%s: --listen %q: %v", where, v, err)
		} else if host != "" && host != "0.0.0.0" && host != "::" {
			t.Errorf("%s: --listen %q: listen on all of the pod's interfaces (:%s), not %s", where, v, p, host)
		} else if port, err = strconv.Atoi(p); err != nil || port <= 0 {
			t.Errorf("%s: --listen %q: not a port", where, v)
		}
		if port > 0 && !slices.ContainsFunc(c.Ports, func(cp containerPort) bool { return int(cp.ContainerPort) == port }) {
			t.Errorf("%s: listens on %d but declares ports %+v", where, port, c.Ports)
		}

		// Beyond loopback it refuses to start without authentication (exit 2).
		values := map[string]string{}
		for _, e := range c.Env {
			if e.Value != nil {
				values[e.Name] = *e.Value
			} else {
				values[e.Name] = "" // from a Secret or a ConfigMap: set, value unknown here
			}
		}
		htpasswd, hasHtpasswd := values["ENGAGEMENT_CONSOLE_HTPASSWD"]
		if v, ok := argValue(c.Args, "htpasswd"); ok {
			htpasswd, hasHtpasswd = v, true
		}
		_, hasHeader := values["ENGAGEMENT_CONSOLE_TRUSTED_USER_HEADER"]
		if _, ok := argValue(c.Args, "trusted-user-header"); ok {
			hasHeader = true
		}
		_, hasProxy := values["ENGAGEMENT_CONSOLE_TRUSTED_PROXY"]
		if _, ok := argValue(c.Args, "trusted-proxy"); ok {
			hasProxy = true
		}
		if hasHeader && !hasProxy {
			t.Errorf("%s: a trusted user header without a trusted proxy: off loopback the console refuses to start", where)
		}
		if !hasHtpasswd && !hasHeader {
			t.Errorf("%s: no htpasswd and no trusted user header: off loopback the console refuses to start without authentication", where)
		}
		if hasHtpasswd && htpasswd != "" {
			checkConsoleHtpasswd(t, where, m, pod, c, htpasswd, values["ENGAGEMENT_CONSOLE_OPERATORS"])
		}

		// Both probes call the health endpoint on the port it listens on.
		// /healthz fails while the database does, and a restart cannot fix
		// that: liveness must give it a minute before it restarts the pod.
		for name, p := range map[string]*probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("%s: no %s httpGet %s", where, name, consoleHealthPath)
				continue
			}
			if p.HTTPGet.Path != consoleHealthPath {
				t.Errorf("%s: %s on %q, want %s (it needs no authentication; other paths answer 401)", where, name, p.HTTPGet.Path, consoleHealthPath)
			}
			if got := portOf(p.HTTPGet.Port, c); port > 0 && got != port {
				t.Errorf("%s: %s on port %q, but the console listens on %d", where, name, p.HTTPGet.Port, port)
			}
			if p.HTTPGet.Scheme != "" && p.HTTPGet.Scheme != "HTTP" {
				t.Errorf("%s: %s scheme %s; the console serves plain HTTP (TLS ends at the ingress or the proxy)", where, name, p.HTTPGet.Scheme)
			}
		}
		if p := c.LivenessProbe; p != nil {
			period, failures := int32(10), int32(3)
			if p.PeriodSeconds != nil {
				period = *p.PeriodSeconds
			}
			if p.FailureThreshold != nil {
				failures = *p.FailureThreshold
			}
			if patience := time.Duration(period*failures) * time.Second; patience < time.Minute {
				t.Errorf("%s: livenessProbe restarts the console after %v of failed checks; a database outage fails them too: give it at least a minute", where, patience)
			}
		}

		// A ClusterIP Service in front: the ingress or the authenticating
		// proxy reaches the console through it, nothing else does.
		found := false
		for _, svc := range m.services {
			if len(svc.Spec.Selector) == 0 || !selects(svc.Spec.Selector, labels) {
				continue
			}
			found = true
			selected[svc.String()] = true
			if svc.Spec.Type != "" && svc.Spec.Type != "ClusterIP" {
				t.Errorf("%s: type %s exposes the console outside the cluster; keep it ClusterIP and put an ingress or an authenticating proxy in front", svc, svc.Spec.Type)
			}
			if len(svc.Spec.Ports) == 0 {
				t.Errorf("%s: no ports", svc)
			}
			for _, sp := range svc.Spec.Ports {
				target := sp.TargetPort
				if target == "" {
					target = intOrString(strconv.Itoa(int(sp.Port)))
				}
				if got := portOf(target, c); port > 0 && got != port {
					t.Errorf("%s: port %d targets %q, but the console listens on %d", svc, sp.Port, target, port)
				}
			}
		}
		if !found {
			t.Errorf("%s: no Service selects its pods", srv)
		}
	}
	for _, svc := range m.services {
		if !selected[svc.String()] {
			t.Errorf("%s: selects no Deployment's pods (selector %v)", svc, svc.Spec.Selector)
		}
	}
	if consoles != 1 {
		t.Errorf("deploy/k8s has %d Deployments running %s, want one", consoles, consoleBinary)
	}
}

// checkConsoleHtpasswd checks the console's htpasswd is a file of a
// mounted Secret (a path, not the file's contents), and that the example
// Secret holds bcrypt entries, the operators among its users.
func checkConsoleHtpasswd(t *testing.T, where string, m manifests, pod podSpec, c container, file, operators string) {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		dir := strings.TrimSuffix(vm.MountPath, "/") + "/"
		name, ok := strings.CutPrefix(file, dir)
		if !ok || vm.SubPath != "" {
			continue
		}
		if vm.ReadOnly == nil || !*vm.ReadOnly {
			t.Errorf("%s: mount %s is writable; mount the htpasswd readOnly", where, vm.MountPath)
		}
		for _, v := range pod.Volumes {
			if v.Name != vm.Name || v.Secret == nil {
				continue
			}
			key := name // a Secret volume without items holds one file per key
			if len(v.Secret.Items) > 0 {
				key = ""
				for _, item := range v.Secret.Items {
					if item.Path == name {
						key = item.Key
					}
				}
				if key == "" {
					t.Errorf("%s: the htpasswd %s is not among volume %s's items", where, file, v.Name)
					return
				}
			}
			for _, ex := range m.secrets["secret.example.yaml"] {
				if ex.Metadata.Name != v.Secret.SecretName {
					continue
				}
				users, ok := htpasswdUsers(ex.StringData[key])
				if !ok {
					t.Errorf("secret.example.yaml: %s %s = %q: want bcrypt htpasswd lines (htpasswd -nbB user 'password')", ex.Metadata.Name, key, ex.StringData[key])
					continue
				}
				for _, op := range strings.Split(operators, ",") {
					if op = strings.TrimSpace(op); op != "" && !slices.Contains(users, op) {
						t.Errorf("%s: operator %q is not a user of the example htpasswd (%s)", where, op, strings.Join(users, ", "))
					}
				}
			}
			return // TestSecretExample reports a Secret the example lacks
		}
	}
	t.Errorf("%s: the htpasswd %s is not a file of a mounted Secret volume", where, file)
}

// selects reports whether a selector's labels are all among labels.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// portOf resolves a port given by number or by the name of one of c's
// ports; 0 when it is neither.
func portOf(p intOrString, c container) int {
	if n, err := strconv.Atoi(string(p)); err == nil {
		return n
	}
	for _, cp := range c.Ports {
		if cp.Name == string(p) {
			return int(cp.ContainerPort)
		}
	}
	return 0
}

// notInKustomization are the files `kubectl apply -k` must not apply.
var notInKustomization = map[string]string{
	"kustomization.yaml":         "itself",
	"secret.example.yaml":        "placeholders would overwrite the real Secret",
	"migrate-job.yaml":           "a Job is immutable; it runs once per release, before the CronJobs",
	"cronjob-daily-sharded.yaml": "an alternative to cronjob-daily.yaml, not an addition",
}

func TestKustomization(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	k, ok := m.kustomizations["kustomization.yaml"]
	if !ok {
		t.Fatal("no deploy/k8s/kustomization.yaml")
	}
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "k8s", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(repoRoot(t), "deploy", "k8s", r)); err != nil {
			t.Errorf("kustomization.yaml lists %s: %v", r, err)
		}
		if why, ok := notInKustomization[r]; ok {
			t.Errorf("kustomization.yaml lists %s: %s", r, why)
		}
	}
	for _, f := range files {
		name := filepath.Base(f)
		if _, ok := notInKustomization[name]; !ok && !slices.Contains(k.Resources, name) {
			t.Errorf("kustomization.yaml does not list %s; list it, or say in notInKustomization why not", name)
		}
	}
	if len(k.Images) != 1 || k.Images[0].Name != "engagement-scheduler" {
		t.Errorf("kustomization.yaml: want one images entry named engagement-scheduler (where registry and tag are set), got %+v", k.Images)
	}
}

// TestDockerignore checks .dockerignore keeps every file the binaries are
// built from in the build context.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	// Docker's rules: the last pattern that matches a file (or a directory
	// holding it) decides; a pattern with ! brings the file back.
	type rule struct {
		re      *regexp.Regexp
		include bool
	}
	var rules []rule
	for _, line := range strings.Split(string(data), "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		p, include := strings.CutPrefix(p, "!")
		rules = append(rules, rule{dockerignorePattern(strings.TrimSuffix(filepath.ToSlash(filepath.Clean(p)), "/")), include})
	}
	ignored := func(file string) bool {
		out := false
		for _, r := range rules {
			for p := file; p != "." && p != "/"; p = path.Dir(p) { // a directory excludes what is in it
				if r.re.MatchString(p) {
					out = !r.include
					break
				}
			}
		}
		return out
	}
	if !ignored(".git/HEAD") || !ignored("bin/engagement-daily") || !ignored("deploy/k8s/cronjob-daily.yaml") {
		t.Error(".dockerignore should leave out .git, bin/ and the manifests")
	}
	// What the Dockerfile copies from the context (not from a stage).
	for _, s := range loadDockerfile(t).stages {
		for _, n := range s.ins {
			if _, fromStage := flagValue(n, "from"); op(n) != "copy" || fromStage {
				continue
			}
			w := words(n)
			for _, src := range w[:len(w)-1] {
				if src == "." {
					continue
				}
				if probe := strings.TrimSuffix(src, "/") + "/README.md"; strings.HasSuffix(src, "/") && ignored(probe) {
					t.Errorf(".dockerignore leaves out %s, which the Dockerfile copies", src)
				}
			}
		}
	}

	// Every file `go build ./cmd/...` reads: the module files and, for each
	// package of the module the binaries import, its Go and embedded files.
	list := exec.Command("go", "list", "-e", "-deps",
		"-f", `{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}`,
		"./cmd/...")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	needed := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		rel, err := filepath.Rel(root, fields[0])
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // a dependency from the module cache
		}
		for _, f := range fields[1:] {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(needed) < 10 {
		t.Fatalf("go list found only %v", needed)
	}
	for _, f := range needed {
		if ignored(f) {
			t.Errorf(".dockerignore leaves out %s, which the build needs", f)
		}
	}
}

// dockerignorePattern compiles a .dockerignore pattern: rooted at the
// context, * and ? within one path element, ** across elements.
func dockerignorePattern(p string) *regexp.Regexp {
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			re.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			re.WriteString(".*")
			i++
		case p[i] == '*':
			re.WriteString("[^/]*")
		case p[i] == '?':
			re.WriteString("[^/]")
		default:
			re.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String())
}

func TestDockerignorePattern(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"*.test", "scheduler.test", true},
		{"*.test", "scheduler/x.test", false}, // rooted, unlike .gitignore
		{"**/*.test", "scheduler/x.test", true},
		{"**/*.test", "x.test", true},
		{"bin", "bin", true},
		{"docs", "docsy", false},
	} {
		if got := dockerignorePattern(tc.pattern).MatchString(tc.path); got != tc.want {
			t.Errorf("pattern %q on %q: %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

// TestMakeImage: `make image` builds the Dockerfile from the repository's
// root under a tag the caller can change, passing the version (for
// --version and the labels), and `make help` lists it. make -n prints what
// it would run, so no Docker engine is needed.
func TestMakeImage(t *testing.T) {
	t.Parallel()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("make", append([]string{"--no-print-directory"}, args...)...)
		cmd.Dir = repoRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if got := run("-n", "image"); !strings.Contains(got, "docker build ") || !strings.Contains(got, "-t engagement-scheduler:") ||
		!strings.HasSuffix(strings.TrimSpace(got), " .") {
		t.Errorf("make -n image runs %q; want docker build of . tagged engagement-scheduler:<tag>", got)
	}
	if got := run("-n", "image", "IMAGE=registry.example/engagement:1.2.3", "VERSION=v1.2.3"); !strings.Contains(got, "-t registry.example/engagement:1.2.3 ") ||
		!strings.Contains(got, "--build-arg VERSION=v1.2.3") {
		t.Errorf("make -n image IMAGE=… VERSION=… runs %q; want that tag and --build-arg VERSION=v1.2.3", got)
	}
	if got := run("help"); !regexp.MustCompile(`(?m)^\s+image\s+\S`).MatchString(got) {
		t.Errorf("make help does not list image:\n%s", got)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// TestMakeTestSaysWhatItInstallsFirst (issue 31, point 2: make test
// installed about 430 packages inside go test, which holds its output
// back, so a newcomer's terminal showed nothing for minutes): make test's
// first step is the visible one that says what the tests need, installs
// it and starts the servers; go test comes after it.
func TestMakeTestSaysWhatItInstallsFirst(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("make", "--no-print-directory", "-n", "test")
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	prepare := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "./internal/testkit/localsvc/prepare") })
	goTest := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, " run ./internal/testkit/testrun ") })
	if prepare < 0 || goTest < 0 || prepare > goTest {
		t.Errorf("make -n test runs %q; want the prepare step, then the tests (internal/testkit/testrun)", lines)
	}
}
