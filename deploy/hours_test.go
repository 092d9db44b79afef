package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/delivery"
)

// Issue 23, point 1: every shipped configuration delivered at any hour: the
// daily job ran at 06:00 UTC, 03:00 in São Paulo, and the goodbye went out
// then. The files a new team copies send inside waking hours in the user's
// zone, with America/Sao_Paulo for users whose zone is unknown.
//
// wantQuiet is the quiet window the shipped files use and docs/deploy.md
// explains: nothing before 09:00 or from 21:00, the user's time.
const (
	wantQuiet    = "21:00-09:00"
	wantTimezone = "America/Sao_Paulo"
)

// checkWakingHours fails unless a scheduled binary's invocation (flags, or
// the literal environment values it sets) keeps the shipped quiet hours in
// São Paulo's zone. A window is accepted when it is wantQuiet or wider:
// what matters is that 03:00 and 22:00 are quiet, and 12:00 is not.
func checkWakingHours(t *testing.T, where string, args []string, env map[string]string) {
	t.Helper()
	quiet, ok := argValue(args, "quiet-hours")
	if !ok {
		quiet, ok = env["ENGAGEMENT_QUIET_HOURS"]
	}
	zone, zoneOK := argValue(args, "timezone")
	if !zoneOK {
		zone, zoneOK = env["ENGAGEMENT_TIMEZONE"]
	}
	if !ok || !zoneOK {
		t.Errorf("%s: no quiet hours in the user's zone: add --quiet-hours %s --timezone %s (docs/deploy.md, \"Waking hours\")", where, wantQuiet, wantTimezone)
		return
	}
	q, err := delivery.ParseQuietHours(quiet)
	if err != nil {
		t.Errorf("%s: --quiet-hours %q: %v", where, quiet, err)
		return
	}
	if zone != wantTimezone {
		t.Errorf("%s: --timezone %q, want %s: the bot's users are in Brazil", where, zone, wantTimezone)
	}
	for _, c := range []struct {
		hour  int
		quiet bool
	}{{3, true}, {6, true}, {22, true}, {12, false}, {18, false}} {
		at := time.Duration(c.hour) * time.Hour
		if q.Contains(at) != c.quiet {
			t.Errorf("%s: --quiet-hours %s: %02d:00 quiet is %v, want %v", where, quiet, c.hour, !c.quiet, c.quiet)
		}
	}
}

// The image's documented examples (the Dockerfile's header) that run a
// scheduled binary keep waking hours too.
func TestDockerfileExamplesKeepWakingHours(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Join the header's comment lines, continuations included, into commands.
	var commands []string
	cur := ""
	for _, line := range strings.Split(string(data), "\n") {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			break
		}
		text = strings.TrimSpace(text)
		cont := strings.HasSuffix(text, `\`)
		cur += " " + strings.TrimSuffix(text, `\`)
		if !cont {
			commands = append(commands, strings.TrimSpace(cur))
			cur = ""
		}
	}
	examples := 0
	for _, c := range commands {
		fields := strings.Fields(c)
		if len(fields) < 2 || fields[0] != "docker" || fields[1] != "run" {
			continue
		}
		for i, f := range fields {
			if slices.Contains(scheduledBinaries, f) && !slices.Contains(fields[i+1:], "--help") {
				examples++
				checkWakingHours(t, "Dockerfile example "+strconv.Quote(c), fields[i+1:], nil)
				break
			}
		}
	}
	if examples == 0 {
		t.Error("the Dockerfile's header shows no example running a scheduled binary")
	}
}
