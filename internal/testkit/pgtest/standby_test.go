package pgtest

import (
	"net"
	"net/url"
	"testing"
	"time"
)

// TestStandby: a standby of the throwaway cluster answers with the
// primary's data, does not show what commits on the primary while its
// replay is paused, shows it after Resume, refuses writes, and is stopped
// when its test ends.
func TestStandby(t *testing.T) {
	t.Parallel()
	dbURL := NewCluster(t).URL
	primary := connectT(t, dbURL)
	if _, err := primary.Exec(t.Context(), `CREATE TABLE standby_probe (n int); INSERT INTO standby_probe VALUES (1)`); err != nil {
		t.Fatal(err)
	}
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
			var n int
			if err := replica.QueryRow(t.Context(), `SELECT count(*) FROM standby_probe`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if got := count(); got != 1 {
			t.Fatalf("the standby has %d rows of the primary's 1", got)
		}
		s.Pause(t)
		if _, err := primary.Exec(t.Context(), `INSERT INTO standby_probe VALUES (2)`); err != nil {
			t.Fatal(err)
		}
		if got := count(); got != 1 {
			t.Errorf("with replay paused the standby shows %d rows, want the 1 it had", got)
		}
		s.Resume(t)
		if got := count(); got != 2 {
			t.Errorf("after Resume the standby shows %d rows, want the primary's 2", got)
		}
		if _, err := replica.Exec(t.Context(), `INSERT INTO standby_probe VALUES (3)`); err == nil {
			t.Error("the standby took a write")
		}
	})
	if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		conn.Close()
		t.Errorf("the standby still answers on %s after its test", addr)
	}
}
