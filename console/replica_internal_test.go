package console

import (
	"testing"
	"time"
)

func TestReplicaStatusSays(t *testing.T) {
	t.Parallel()
	d := func(s float64) *time.Duration { v := time.Duration(s * float64(time.Second)); return &v }
	for _, tc := range []struct {
		st           replicaStatus
		says, header string
	}{
		{replicaStatus{Standby: false}, "replica: the --replica-url server is not a standby (it is not in recovery), so it is never behind", "0"},
		{replicaStatus{Standby: true, CaughtUp: true, Lag: d(600)}, "replica: up to date", "0"},
		{replicaStatus{Standby: true, CaughtUp: true, Paused: true}, "replica: up to date, replay paused", "0"},
		{replicaStatus{Standby: true, Lag: d(4.2)}, "replica: 4.2 s behind", "4.200"},
		{replicaStatus{Standby: true, Lag: d(90), Paused: true}, "replica: 1.5 min behind, replay paused", "90.000"},
		{replicaStatus{Standby: true}, "replica: behind (it has replayed nothing since it started)", "unknown"},
	} {
		if got := tc.st.String(); got != tc.says {
			t.Errorf("%+v says %q, want %q", tc.st, got, tc.says)
		}
		if got := tc.st.lagHeader(); got != tc.header {
			t.Errorf("%+v: X-Replica-Lag %q, want %q", tc.st, got, tc.header)
		}
	}
	var none *replicaStatus
	if none.String() != "" {
		t.Errorf("no replica says %q", none.String())
	}
}
