package deploy_test

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/delivery"
)

// The send budget (queue-process --daily-limit): without one, the first
// daily run on an existing user base sends thousands of goodbyes in one
// morning from one WhatsApp number. Every shipped file that runs a binary
// able to send keeps the budget docs/delivery.md ("The send budget")
// recommends for the webhook to a Baileys bot, the transport they ship
// with: at most wantDailyLimit recipients a day, warmed up by wantRamp.
// The daily and weekly jobs carry it too, as they carry the quiet hours:
// they only queue as shipped, but given a transport their queue step
// sends, and a process without the budget would send outside it (one with
// another ramp would restart the ramp).
const (
	wantDailyLimit = 300
	wantRamp       = "50,1.5"
)

// sendBudget reads the send budget a scheduled binary's invocation sets
// (its flags, or the literal environment values it sets; a flag wins) and
// says what is wrong with it: missing, unreadable, above wantDailyLimit,
// or without the ramp.
func sendBudget(args []string, env map[string]string) (limit, ramp string, problems []string) {
	limit, ok := argValue(args, "daily-limit")
	if !ok {
		limit, ok = env["ENGAGEMENT_DAILY_LIMIT"]
	}
	ramp, rampOK := argValue(args, "daily-limit-ramp")
	if !rampOK {
		ramp, rampOK = env["ENGAGEMENT_DAILY_LIMIT_RAMP"]
	}
	if !ok {
		return "", ramp, []string{fmt.Sprintf("no send budget: add --daily-limit %d --daily-limit-ramp %s (or ENGAGEMENT_DAILY_LIMIT, ENGAGEMENT_DAILY_LIMIT_RAMP), docs/delivery.md, \"The send budget\"", wantDailyLimit, wantRamp)}
	}
	n, err := strconv.Atoi(limit)
	switch {
	case err != nil || n < 1:
		problems = append(problems, fmt.Sprintf("daily limit %q is not a positive whole number", limit))
	case n > wantDailyLimit:
		problems = append(problems, fmt.Sprintf("daily limit %d is above the %d docs/delivery.md recommends for a Baileys number", n, wantDailyLimit))
	}
	if !rampOK {
		problems = append(problems, fmt.Sprintf("daily limit %s without a ramp: a number new to this sending warms up (--daily-limit-ramp %s)", limit, wantRamp))
	} else if r, err := delivery.ParseRamp(ramp); err != nil {
		problems = append(problems, fmt.Sprintf("ramp: %v", err))
	} else if n > 0 && r.Start > n {
		problems = append(problems, fmt.Sprintf("ramp %s starts above the daily limit %d", ramp, n))
	}
	return limit, ramp, problems
}

// TestShippedFilesKeepOneSendBudget: every scheduled binary that can send,
// in railway.cron.yml, deploy/railway/*.json and deploy/k8s, keeps a send
// budget, and all of them the same one (processes that send on one
// transport share its budget: each claims by its own limit, and a ramp of
// its own would start the ramp again).
func TestShippedFilesKeepOneSendBudget(t *testing.T) {
	t.Parallel()
	budgets := map[string][]string{} // "limit ramp" -> where
	check := func(where, binary string, args []string, env map[string]string) {
		t.Helper()
		if !delivers(binary) {
			return
		}
		limit, ramp, problems := sendBudget(args, env)
		for _, p := range problems {
			t.Errorf("%s: %s", where, p)
		}
		if limit != "" {
			key := limit + " " + ramp
			budgets[key] = append(budgets[key], where)
		}
	}
	for i, j := range loadRailway(t).Jobs {
		if fields := strings.Fields(j.Command); len(fields) > 0 {
			check(fmt.Sprintf("railway.cron.yml jobs[%d] (%s)", i, j.Name), fields[0], fields[1:], nil)
		}
	}
	for name, c := range loadRailwayConfigs(t) {
		if fields := strings.Fields(c.Deploy.StartCommand); len(fields) > 0 {
			check("deploy/railway/"+name+" startCommand", fields[0], fields[1:], nil)
		}
	}
	for where, pod := range loadManifests(t).pods() {
		for _, c := range pod.Containers {
			if len(c.Command) != 1 {
				continue // TestKubernetesPods reports it
			}
			env := map[string]string{}
			for _, e := range c.Env {
				if e.Value != nil {
					env[e.Name] = *e.Value
				}
			}
			check(where+" container "+c.Name, path.Base(c.Command[0]), c.Args, env)
		}
	}
	if len(budgets) == 0 {
		t.Fatal("no shipped file runs a binary that sends: the test found nothing to check")
	}
	if len(budgets) > 1 {
		var lines []string
		for _, key := range slices.Sorted(maps.Keys(budgets)) {
			lines = append(lines, fmt.Sprintf("  %s: %s", key, strings.Join(budgets[key], ", ")))
		}
		t.Errorf("the shipped files disagree on the send budget (daily limit and ramp); every process on a transport must keep the same:\n%s", strings.Join(lines, "\n"))
	}
	for key := range budgets {
		if want := fmt.Sprintf("%d %s", wantDailyLimit, wantRamp); key != want {
			t.Errorf("the shipped send budget is %q, docs/delivery.md recommends %q: change both together", key, want)
		}
	}
}

// The check fails on the mistakes it is there for.
func TestSendBudgetCheckCatchesMistakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string // in a problem; "" for none
	}{
		{"the shipped flags", []string{"--daily-limit", "300", "--daily-limit-ramp", "50,1.5"}, nil, ""},
		{"the shipped variables", nil, map[string]string{"ENGAGEMENT_DAILY_LIMIT": "300", "ENGAGEMENT_DAILY_LIMIT_RAMP": "50,1.5"}, ""},
		{"a flag over a variable", []string{"--daily-limit=250"}, map[string]string{"ENGAGEMENT_DAILY_LIMIT": "5000", "ENGAGEMENT_DAILY_LIMIT_RAMP": "50,2"}, ""},
		{"none", []string{"--quiet-hours", "21:00-09:00"}, nil, "no send budget"},
		{"no ramp", []string{"--daily-limit", "300"}, nil, "without a ramp"},
		{"too high", []string{"--daily-limit", "5000", "--daily-limit-ramp", "50,1.5"}, nil, "above"},
		{"not a number", nil, map[string]string{"ENGAGEMENT_DAILY_LIMIT": "lots", "ENGAGEMENT_DAILY_LIMIT_RAMP": "50,1.5"}, "positive whole number"},
		{"zero", []string{"--daily-limit", "0", "--daily-limit-ramp", "50,1.5"}, nil, "positive whole number"},
		{"a bad ramp", []string{"--daily-limit", "300", "--daily-limit-ramp", "50"}, nil, "ramp"},
		{"a ramp above the limit", []string{"--daily-limit", "100", "--daily-limit-ramp", "200,1.5"}, nil, "starts above"},
	} {
		_, _, problems := sendBudget(tc.args, tc.env)
		found := slices.ContainsFunc(problems, func(p string) bool { return tc.want != "" && strings.Contains(p, tc.want) })
		switch {
		case tc.want == "" && len(problems) > 0:
			t.Errorf("%s: problems %q, want none", tc.name, problems)
		case tc.want != "" && !found:
			t.Errorf("%s: problems %q, want one saying %q", tc.name, problems, tc.want)
		}
	}
}
