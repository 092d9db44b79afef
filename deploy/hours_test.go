package deploy_test

import (
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
	checkQuietHours(t, where, quiet, zone)
}

// checkQuietHours fails unless quiet, parsed as queue-process parses
// --quiet-hours, holds 03:00 and 22:00 and leaves 12:00 free, in zone.
func checkQuietHours(t *testing.T, where, quiet, zone string) {
	t.Helper()
	q, err := delivery.ParseQuietHours(quiet)
	if err != nil {
		t.Errorf("%s: --quiet-hours %q: %v", where, quiet, err)
		return
	}
	if zone != wantTimezone {
		t.Errorf("%s: --timezone %q, want %s: the bot's users are in Brazil", where, zone, wantTimezone)
	}
	// Issue 23's case: the daily job's 06:00 UTC, in the users' zone.
	if loc, err := time.LoadLocation(zone); err != nil {
		t.Errorf("%s: --timezone %q: %v", where, zone, err)
	} else {
		local := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC).In(loc)
		if clock := time.Duration(local.Hour())*time.Hour + time.Duration(local.Minute())*time.Minute; !q.Contains(clock) {
			t.Errorf("%s: the daily job's 06:00 UTC is %s in %s, outside --quiet-hours %s: its goodbyes would go out then", where, local.Format("15:04"), zone, quiet)
		}
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
