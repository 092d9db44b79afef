package pgtest

import (
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// TestStandby: a standby of the throwaway cluster answers with the
// primary's data, does not show what commits on the primary while its
// replay is paused, shows it after Resume, refuses writes, and is stopped
// when its test ends.
func TestStandby(t *testing.T) {
	t.Parallel()
	dbURL := NewCluster(t).URL
	primary := connectT(t, dbURL)
	addProfile(t, primary)
	var addr string
	t.Run("replica", func(t *testing.T) {
		s := NewStandby(t, dbURL)
		u, err := url.Parse(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		addr = u.Host
		replica := connectT(t, s.URL)
		count := func() int {
			t.Helper()
			return countProfiles(t, replica)
		}
		if got := count(); got != 1 {
			t.Fatalf("the standby has %d rows of the primary's 1", got)
		}
		s.Pause(t)
		addProfile(t, primary)
		if got := count(); got != 1 {
			t.Errorf("with replay paused the standby shows %d rows, want the 1 it had", got)
		}
		s.Resume(t)
		if got := count(); got != 2 {
			t.Errorf("after Resume the standby shows %d rows, want the primary's 2", got)
		}
		if _, err := kitAddProfileQuery.One(t.Context(), replica, sqlfile.None{}); err == nil {
			t.Error("the standby took a write")
		}
	})
	if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		conn.Close()
		t.Errorf("the standby still answers on %s after its test", addr)
	}
}
