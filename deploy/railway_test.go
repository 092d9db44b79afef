package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// railwayConfig is a Railway config-as-code file (railway.json), limited to
// the fields the project sets; decodeRailway rejects any other, so a
// misspelt field (which Railway would ignore) fails the test.
type railwayConfig struct {
	Schema string `json:"$schema"`
	Build  struct {
		Builder        string `json:"builder"`
		DockerfilePath string `json:"dockerfilePath"`
	} `json:"build"`
	Deploy struct {
		StartCommand       string   `json:"startCommand"`
		CronSchedule       string   `json:"cronSchedule"`
		PreDeployCommand   []string `json:"preDeployCommand"`
		RestartPolicyType  string   `json:"restartPolicyType"`
		HealthcheckPath    string   `json:"healthcheckPath"`
		HealthcheckTimeout *int     `json:"healthcheckTimeout"`
	} `json:"deploy"`
}

const railwaySchema = "https://railway.com/railway.schema.json"

// loadRailwayConfigs reads deploy/railway/*.json, by file name.
func loadRailwayConfigs(t *testing.T) map[string]railwayConfig {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "railway", "*"))
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]railwayConfig{}
	for _, f := range files {
		name := filepath.Base(f)
		if name == "README.md" {
			continue
		}
		if filepath.Ext(name) != ".json" {
			t.Errorf("deploy/railway/%s: only <binary>.json files (and README.md) belong here", name)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := decodeRailway(data)
		if err != nil {
			t.Errorf("deploy/railway/%s: %v", name, err)
			continue
		}
		configs[name] = c
	}
	return configs
}

// railwayFields are the keys decodeRailway accepts, spelt exactly (Railway's
// schema is case-sensitive; encoding/json alone is not).
var railwayFields = map[string][]string{
	"":       {"$schema", "build", "deploy"},
	"build":  {"builder", "dockerfilePath"},
	"deploy": {"startCommand", "cronSchedule", "preDeployCommand", "restartPolicyType", "healthcheckPath", "healthcheckTimeout"},
}

// decodeRailway decodes one config file strictly: one JSON object, and no
// key that railwayFields does not list, in exactly that spelling.
func decodeRailway(data []byte) (railwayConfig, error) {
	var c railwayConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, err
	}
	if dec.More() {
		return c, fmt.Errorf("more than one JSON value")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return c, err
	}
	check := func(section string, obj map[string]json.RawMessage) error {
		for k := range obj {
			if !slices.Contains(railwayFields[section], k) {
				return fmt.Errorf("unknown field %q in %q (known: %s)", k, section, strings.Join(railwayFields[section], ", "))
			}
		}
		return nil
	}
	if err := check("", top); err != nil {
		return c, err
	}
	for _, section := range []string{"build", "deploy"} {
		if raw, ok := top[section]; ok {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(raw, &obj); err != nil {
				return c, fmt.Errorf("%s: %w", section, err)
			}
			if err := check(section, obj); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// Railway reads one config file per service (Settings → Config-as-code →
// Railway config file). Each of deploy/railway/<service>.json must build
// the repository's Dockerfile, migrate before deploying, and run its
// binary with arguments the real command accepts: a cron job on the
// schedule railway.cron.yml documents, never restarted once finished; the
// console, the one long-running service, with no schedule, a healthcheck,
// and restarted when it fails.
func TestRailwayConfigAsCode(t *testing.T) {
	t.Parallel()
	configs := loadRailwayConfigs(t)
	reference := map[string]string{} // binary -> schedule, from railway.cron.yml
	commands := map[string]string{}
	for _, j := range loadRailway(t).Jobs {
		reference[j.Name] = j.Schedule
		commands[j.Name] = j.Command
	}
	root := repoRoot(t)
	for _, service := range slices.Concat(scheduledServices, longRunningServices) {
		if _, ok := configs[service+".json"]; !ok {
			t.Errorf("deploy/railway/%s.json is missing: every service gets its config file", service)
		}
	}
	for name, c := range configs {
		where := "deploy/railway/" + name
		service := strings.TrimSuffix(name, ".json")
		longRunning := slices.Contains(longRunningServices, service)
		if !longRunning && !slices.Contains(scheduledServices, service) {
			t.Errorf("%s: %q is not a service (%s)", where, service, strings.Join(slices.Concat(scheduledServices, longRunningServices), ", "))
			continue
		}
		if c.Schema != railwaySchema {
			t.Errorf("%s: $schema %q, want %q (editors validate the file against it)", where, c.Schema, railwaySchema)
		}
		if c.Build.Builder != "DOCKERFILE" || c.Build.DockerfilePath == "" {
			t.Errorf("%s: build %+v, want the DOCKERFILE builder with a dockerfilePath", where, c.Build)
		} else if _, err := os.Stat(filepath.Join(root, c.Build.DockerfilePath)); err != nil {
			t.Errorf("%s: dockerfilePath %q: %v (paths are relative to the repository root)", where, c.Build.DockerfilePath, err)
		}

		// Before a new image runs, the schema is brought up to date.
		d := c.Deploy
		if len(d.PreDeployCommand) != 1 {
			t.Errorf("%s: preDeployCommand %q, want exactly [\"engagementctl migrate up\"]", where, d.PreDeployCommand)
		} else if pre := strings.Fields(d.PreDeployCommand[0]); len(pre) < 3 || pre[0] != "engagementctl" || pre[1] != "migrate" || pre[2] != "up" {
			t.Errorf("%s: preDeployCommand %q, want engagementctl migrate up", where, d.PreDeployCommand[0])
		} else {
			checkInvocation(t, fmt.Sprintf("%s preDeployCommand", where), "engagementctl", pre[1:], nil)
		}

		// The start command: the binary named like the file, arguments its
		// command accepts, no shell (the image has none).
		if strings.ContainsAny(d.StartCommand, `"'$&|;<>*\`+"`") {
			t.Errorf("%s: startCommand %q needs a shell; the image has none", where, d.StartCommand)
		}
		fields := strings.Fields(d.StartCommand)
		if len(fields) == 0 || serviceOf(fields[0], fields[1:]) != service {
			t.Errorf("%s: startCommand %q, want it to run the %s service", where, d.StartCommand, service)
			continue
		}
		binary, args := fields[0], fields[1:]
		checkInvocation(t, where+" startCommand", binary, args, nil)
		if longRunning {
			checkRailwayServer(t, where, binary, args, d.CronSchedule, d.HealthcheckPath, d.HealthcheckTimeout, d.RestartPolicyType)
			continue
		}
		if d.HealthcheckPath != "" || d.HealthcheckTimeout != nil {
			t.Errorf("%s: a healthcheck on a cron job, which serves nothing: its deployments would never go live", where)
		}
		if delivers(binary) {
			checkWakingHours(t, where+" startCommand", args, nil)
		}
		if v, _ := argValue(args, "output"); v != "json" {
			t.Errorf("%s: startCommand without --output json; every run should print one JSON summary line", where)
		}
		if d.StartCommand != commands[service] {
			t.Errorf("%s: startCommand %q, but railway.cron.yml documents %q: keep the reference in step", where, d.StartCommand, commands[service])
		}

		// The schedule: standard cron, UTC, the documented one.
		if d.CronSchedule != reference[service] {
			t.Errorf("%s: cronSchedule %q, but railway.cron.yml says %q", where, d.CronSchedule, reference[service])
		}
		period, ok := checkSchedule(t, where, binary, d.CronSchedule)
		if ok {
			if v, has := argValue(args, "max-duration"); has {
				if dur, err := time.ParseDuration(v); err != nil || dur <= 0 || dur+30*time.Second > period {
					t.Errorf("%s: --max-duration %s with a run every %v: the run must stop claiming at least 30 s before the next is due", where, v, period)
				}
			} else if binary == "queue-process" {
				t.Errorf("%s: queue-process without --max-duration can run into its next schedule", where)
			}
		}

		// A cron service's run ends; Railway must not restart it.
		if d.RestartPolicyType != "NEVER" {
			t.Errorf("%s: restartPolicyType %q, want NEVER: a finished cron run is not restarted, a failed one waits for its next schedule", where, d.RestartPolicyType)
		}
	}
}

// checkRailwayServer checks the deploy settings of a long-running service
// (the console): always up, so no schedule; live only once its health
// endpoint answers; brought back when it fails; on the port Railway gives.
func checkRailwayServer(t *testing.T, where, binary string, args []string, cronSchedule, healthcheckPath string, healthcheckTimeout *int, restartPolicy string) {
	t.Helper()
	if cronSchedule != "" {
		t.Errorf("%s: cronSchedule %q: %s is a long-running service; a schedule would make Railway wait for it to exit", where, cronSchedule, binary)
	}
	if healthcheckPath != consoleHealthPath {
		t.Errorf("%s: healthcheckPath %q, want %s: without it Railway routes to a deployment before it can answer", where, healthcheckPath, consoleHealthPath)
	}
	// Railway's default is 300 s; a shorter one fails a deployment that
	// cannot reach the database sooner, while the previous one serves on.
	if healthcheckTimeout == nil || *healthcheckTimeout < 10 || *healthcheckTimeout > 300 {
		t.Errorf("%s: healthcheckTimeout %v, want 10 to 300 seconds (time to start and reach the database)", where, deref(healthcheckTimeout))
	}
	if restartPolicy != "ON_FAILURE" && restartPolicy != "ALWAYS" {
		t.Errorf("%s: restartPolicyType %q, want ON_FAILURE: a server that stopped must come back", where, restartPolicy)
	}
	// Railway sets PORT and routes to it; --listen would take precedence
	// and listen where neither the healthcheck nor the proxy looks.
	if v, ok := argValue(args, "listen"); ok {
		t.Errorf("%s: --listen %s: on Railway the console listens on $PORT, which it does without --listen", where, v)
	}
	for _, f := range []string{"htpasswd", "trusted-user-header", "trusted-proxy", "operators"} {
		if _, ok := argValue(args, f); ok {
			t.Errorf("%s: --%s in startCommand: set ENGAGEMENT_CONSOLE_* in the service's variables, not in this file", where, f)
		}
	}
}

// The checks above fail on the mistakes they are there for.
func TestRailwayConfigDecodingIsStrict(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{"deploy": {"cronSchedul": "0 6 * * *"}}`,
		`{"deploy": {"restartPolicy": "NEVER"}}`,
		`{"build": {"builder": "DOCKERFILE", "dockerFilePath": "Dockerfile"}}`,
		`{"Deploy": {"startCommand": "engagement-daily"}}`,
		`{"deploy": {}} {"deploy": {}}`,
		`{"deploy": {"healthCheckPath": "/healthz"}}`,
		`{"deploy": {"healthcheckTimeout": "120"}}`,
	} {
		if _, err := decodeRailway([]byte(bad)); err == nil {
			t.Errorf("%s decoded without error; a misspelt field must fail", bad)
		}
	}
}
