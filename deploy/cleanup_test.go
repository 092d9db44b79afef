package deploy_test

import (
	"path"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/retention"
)

// Issue 24: engagementctl cleanup was in no shipped schedule, so the queue
// and the send ledger grew for ever. Every platform runs it daily, with the
// retention verify assumes (retention.DefaultRetention, verify's --retention
// default): a shorter one would make verify report goodbyes cleanup
// deleted as missing.
func TestCleanupIsScheduledWithVerifysRetention(t *testing.T) {
	t.Parallel()
	check := func(where string, args []string) {
		t.Helper()
		v, ok := argValue(args, "older-than")
		d, err := time.ParseDuration(v)
		if !ok || err != nil || d != retention.DefaultRetention {
			t.Errorf("%s: cleanup --older-than %q, want %s (verify's --retention)", where, v, retention.DefaultRetention)
		}
	}
	found := 0
	for _, j := range loadRailway(t).Jobs {
		if fields := strings.Fields(j.Command); j.Name == cleanupService && len(fields) > 1 {
			found++
			check("railway.cron.yml", fields[1:])
			if period, ok := schedulePeriod(t, "railway.cron.yml "+j.Name, j.Schedule); ok && period > 24*time.Hour {
				t.Errorf("railway.cron.yml: cleanup every %v, want at least daily", period)
			}
		}
	}
	for _, w := range loadManifests(t).workloads {
		if w.cronSpec == nil || len(w.job.Template.Spec.Containers) != 1 {
			continue
		}
		c := w.job.Template.Spec.Containers[0]
		if len(c.Command) == 1 && serviceOf(path.Base(c.Command[0]), c.Args) == cleanupService {
			found++
			check(w.String(), c.Args)
		}
	}
	if found != 2 {
		t.Errorf("cleanup is scheduled %d times across railway.cron.yml and deploy/k8s, want once in each", found)
	}
}
