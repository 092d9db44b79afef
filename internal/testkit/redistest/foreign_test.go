package redistest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 55, finding 9, for Redis: the kit took whatever answered PING on
// its throwaway port for its own server. Here a redis-server that another
// checkout started (another working folder, its own record) runs on the
// port; the kit, asked for its server in its own folder on that port, must
// refuse it, saying why and what to do, and start nothing and stop
// nothing. The other checkout's kit still takes it as its own.
func TestTheKitUsesNoForeignRedisOnItsPort(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	foreign, own := filepath.Join(base, "other-checkout"), filepath.Join(base, "this-checkout")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	t.Cleanup(func() {
		for _, dir := range []string{own, foreign} {
			if _, err := stopThrowaway(dir); err != nil {
				t.Errorf("stop the redis-server of %s: %v", dir, err)
			}
		}
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	u, err := startThrowaway(ctx, foreign, port)
	if err != nil {
		t.Fatalf("start the other checkout's redis-server: %v", err)
	}

	got, err := startThrowaway(ctx, own, port)
	if err == nil {
		t.Fatalf("the kit took the redis-server of %s, on its port %d, for its own in %s (%s)", foreign, port, own, got)
	}
	t.Logf("refused: %v", err)
	for _, want := range []string{strconv.Itoa(port), own, "REDISTEST_PORT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(own, "redis.pid")); !os.IsNotExist(err) {
		t.Errorf("the kit started a redis-server in %s although the port is taken (%v)", own, err)
	}
	if err := ping(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
		t.Errorf("the other checkout's redis-server no longer answers: %v", err)
	}

	// Its own, running, it takes as before.
	if again, err := startThrowaway(ctx, foreign, port); err != nil || again != u {
		t.Errorf("the server of its own folder: %s, %v; want %s, taken as it runs", again, err, u)
	}
}
