// Package localsvc holds what the throwaway local services of the tests and
// the demo (PostgreSQL in pgtest, Redis in redistest) share: running a
// command, installing a Debian package, and a cross-process file lock.
package localsvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Run runs a command in dir with no stdin and returns its combined output;
// a failure's error includes the command line and the (trimmed) output.
func Run(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second // a daemon that kept our output pipe open must not hang us
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	if err != nil {
		if len(text) > 4000 {
			text = "..." + text[len(text)-4000:]
		}
		return text, fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, text)
	}
	return text, nil
}

// Tail returns the last lines of the file at path, for error messages.
func Tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// AptInstall installs a Debian package with apt-get, as root or through
// password-less sudo, announcing it on stderr as who. hint says what the
// user can do instead; it leads every error.
func AptInstall(ctx context.Context, who, pkg, hint string) error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New(hint)
	}
	var prefix []string
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("sudo"); err != nil {
			return fmt.Errorf("%s (not root and no sudo to install it)", hint)
		}
		prefix = []string{"sudo", "-n"}
	}
	fmt.Fprintf(os.Stderr, "%s: installing the %s package with apt-get\n", who, pkg)
	for _, args := range [][]string{
		{"apt-get", "update"},
		{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", pkg},
	} {
		if _, err := Run(ctx, "/", append(append([]string{}, prefix...), args...)...); err != nil {
			return fmt.Errorf("%s; installing it failed: %w", hint, err)
		}
	}
	return nil
}

// LockFile takes an exclusive flock on path, waiting (politely to ctx)
// while another process holds it, and returns the function that releases it.
func LockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		if f, err = os.Open(path); err != nil { // flock works on a read-only descriptor too
			return nil, fmt.Errorf("open lock file: %w", err)
		}
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Resolver finds a local service once per process. The search runs in the
// background under its own time limit, so a caller whose context ends stops
// waiting without spoiling the answer (or error) for the others.
type Resolver struct {
	Timeout time.Duration                             // the search's time limit
	Find    func(ctx context.Context) (string, error) // the search

	once sync.Once
	done chan struct{}
	url  string
	err  error
}

// URL returns the service's URL, searching for it on the first call.
func (r *Resolver) URL(ctx context.Context) (string, error) {
	r.once.Do(func() {
		r.done = make(chan struct{})
		go func() {
			defer close(r.done)
			ctx, cancel := context.WithTimeout(context.Background(), r.Timeout)
			defer cancel()
			r.url, r.err = r.Find(ctx)
		}()
	})
	select {
	case <-r.done:
		return r.url, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
