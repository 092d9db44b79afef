package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/cli/jobcmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

func TestWeeklyBinary(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	asOf := time.Date(2021, 1, 1, 9, 0, 0, 0, time.UTC)      // a Friday of ISO week 2020-W53
	fixture.InactiveUsers(t, pool, 20, asOf.Add(-time.Hour)) // active an hour ago

	if res := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, cmdtest.Env()); res.Code != 2 || !strings.Contains(res.Stderr, "DATABASE_URL") {
		t.Errorf("without a database: exit %d stderr %q, want 2 naming DATABASE_URL", res.Code, res.Stderr)
	}
	if res := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, cmdtest.Env("DATABASE_URL="+url), "--as-of", "2027-13-01"); res.Code != 2 {
		t.Errorf("bad --as-of: exit %d, want 2", res.Code)
	}
	if res := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, cmdtest.Env("DATABASE_URL="+pgtest.NewEmptyDatabase(t))); res.Code != 1 || !strings.Contains(res.Stderr, "engagementctl migrate up") {
		t.Errorf("unmigrated database: exit %d stderr %q, want 1 pointing at migrations", res.Code, res.Stderr)
	}

	type summary struct {
		Job        string `json:"job"`
		ISOWeek    string `json:"iso_week"`
		Queued     int    `json:"queued"`
		Duplicates int    `json:"duplicates"`
	}
	for i, want := range []summary{
		{Job: "engagement-weekly", ISOWeek: "2020-W53", Queued: 20},
		{Job: "engagement-weekly", ISOWeek: "2020-W53", Duplicates: 20},
	} {
		res := cmdtest.Exec(t, jobcmd.NewWeeklyCommand, cmdtest.Env("DATABASE_URL="+url), "--as-of", asOf.Format(time.RFC3339), "--output", "json")
		if res.Code != 0 {
			t.Fatalf("run %d: exit %d: %s", i+1, res.Code, res.Stderr)
		}
		var got summary
		dec := json.NewDecoder(strings.NewReader(res.Stdout))
		if err := dec.Decode(&got); err != nil || dec.More() {
			t.Fatalf("run %d: stdout is not one JSON object (%v): %s", i+1, err, res.Stdout)
		}
		if got != want {
			t.Errorf("run %d: summary %+v, want %+v", i+1, got, want)
		}
	}
}
