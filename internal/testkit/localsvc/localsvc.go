// Package localsvc holds what the throwaway local services of the tests and
// the demo (PostgreSQL in pgtest, Redis in redistest) share: running a
// command, installing a Debian package (and leaving its system services
// stopped and disabled), and a cross-process file lock.
package localsvc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/syncbuf"
)

// Run runs a command in dir with no stdin and returns its combined output;
// a failure's error includes the command line and the (trimmed) output.
func Run(ctx context.Context, dir string, args ...string) (string, error) {
	return RunWatched(ctx, dir, func(string) {}, args...)
}

// RunWatched is Run, with each line of the command's standard output also
// handed to watch as it comes (the output is still returned whole).
func RunWatched(ctx context.Context, dir string, watch func(line string), args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	var out syncbuf.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, pw), &out
	cmd.WaitDelay = 5 * time.Second // a daemon that kept our output pipe open must not hang us
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			watch(sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr) // a line too long for the scanner: keep the command writing
	}()
	err := cmd.Run()
	pw.Close()
	<-done
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

// progress is where AptInstall says what it does (tests swap it).
var progress io.Writer = os.Stderr

// aptLock serializes AptInstall across processes: apt-get refuses to run
// while another holds the package database.
var aptLock = filepath.Join(os.TempDir(), "engagement-apt.lock")

// AptInstall installs the Debian package pkg (a name, or the path of a .deb
// file) as AptInstallAll does. hint says what the user can do instead; it
// leads every error.
func AptInstall(ctx context.Context, who, pkg, hint string, services ...string) error {
	return AptInstallAll(ctx, who, []string{pkg}, hint, services...)
}

// AptInstallAll installs the Debian packages pkgs (names, or paths of .deb
// files) with one apt-get update and one apt-get install -y
// --no-install-recommends, as root or through password-less sudo, and
// leaves none of services (the system services the packages ship, e.g.
// "postgresql") running or enabled: while apt-get runs, a policy-rc.d
// refuses every service start (unless the machine has a policy of its
// own), and afterwards each service is stopped and disabled
// (DisableServices). Before installing it says on stderr, as who, how many
// packages apt will install with their dependencies (550 for the
// tests' on a minimal Debian), read from a simulated install. One install runs at a
// time across processes. hint says what the user can do instead; it leads
// every error.
func AptInstallAll(ctx context.Context, who string, pkgs []string, hint string, services ...string) error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New(hint)
	}
	sudo, err := sudoPrefix()
	if err != nil {
		return fmt.Errorf("%s (%w)", hint, err)
	}
	unlock, err := LockFile(ctx, aptLock)
	if err != nil {
		return fmt.Errorf("%s; %w", hint, err)
	}
	defer unlock()
	run := func(args ...string) (string, error) {
		return Run(ctx, "/", append(append([]string{}, sudo...), args...)...)
	}
	names := strings.Join(pkgs, ", ")
	fmt.Fprintf(progress, "%s: apt-get update, to install %s\n", who, names)
	if _, err := run("apt-get", "update"); err != nil {
		return fmt.Errorf("%s; apt-get update failed: %w", hint, err)
	}
	install := append([]string{"apt-get", "install", "-y", "--no-install-recommends"}, pkgs...)
	if out, err := run(append([]string{"env", "DEBIAN_FRONTEND=noninteractive"}, append(install[:2:2], append([]string{"-s"}, install[2:]...)...)...)...); err == nil {
		n := countInstalls(out)
		fmt.Fprintf(progress, "%s: installing %s with apt-get (--no-install-recommends): %d Debian packages with what they need "+
			"(a few seconds each: on a fresh machine, minutes)\n", who, names, n)
	} else {
		fmt.Fprintf(progress, "%s: installing %s with apt-get (--no-install-recommends)\n", who, names)
	}
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policy); os.IsNotExist(err) {
		if _, err := run("sh", "-c", "printf '#!/bin/sh\\n# engagement scheduler (internal/testkit/localsvc): no service starts during an install\\nexit 101\\n' > "+policy+" && chmod 755 "+policy); err != nil {
			return fmt.Errorf("%s; refusing service starts during the install failed: %w", hint, err)
		}
		defer func() {
			_, _ = run("rm", "-f", policy) // before DisableServices, which the policy would refuse too
			DisableServices(ctx, services...)
		}()
	} else {
		defer DisableServices(ctx, services...)
	}
	// apt's status lines (APT::Status-Fd) say how far the download and
	// the install are: each tenth is said, so that minutes of installing
	// never pass behind one line (issue 60: 2 min 39 s on a fresh machine).
	install = append(install[:2:2], append([]string{"-o", "APT::Status-Fd=1"}, install[2:]...)...)
	status, began := &aptStatus{who: who, w: progress}, time.Now()
	if _, err := RunWatched(ctx, "/", status.line, append(append([]string{}, sudo...), append([]string{"env", "DEBIAN_FRONTEND=noninteractive"}, install...)...)...); err != nil {
		return fmt.Errorf("%s; installing it failed: %w", hint, err)
	}
	fmt.Fprintf(progress, "%s: installed %s in %s\n", who, names, time.Since(began).Round(time.Second))
	return nil
}

// aptStatus turns apt's status lines ("dlstatus:n:percent:what" while it
// downloads, "pmstatus:package:percent:what" while dpkg installs) into a
// progress line at each tenth of each phase.
type aptStatus struct {
	who  string
	w    io.Writer
	said map[string]int // phase → the last tenth said
}

func (s *aptStatus) line(line string) {
	kind, rest, ok := strings.Cut(line, ":")
	phase := map[string]string{"dlstatus": "downloading", "pmstatus": "installing"}[kind]
	if !ok || phase == "" {
		return
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) != 3 {
		return
	}
	pct, err := strconv.ParseFloat(parts[1], 64)
	if err != nil {
		return
	}
	if s.said == nil {
		s.said = map[string]int{}
	}
	tenth := int(pct / 10)
	if last, ok := s.said[phase]; ok && tenth <= last {
		return
	}
	s.said[phase] = tenth
	fmt.Fprintf(s.w, "%s: apt-get: %s %d%% (%s)\n", s.who, phase, tenth*10, parts[2])
}

// countInstalls counts the packages a simulated apt-get install (-s) would
// install: its "Inst " lines.
func countInstalls(out string) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Inst ") {
			n++
		}
	}
	return n
}

// DisableServices stops and disables the system services named (e.g.
// "redis-server"), under systemd or SysV init alike, so that a package
// installed for the tests leaves its binaries only. Every step is best
// effort: a step that does not apply (no systemd, a service not running)
// fails harmlessly.
func DisableServices(ctx context.Context, services ...string) {
	sudo, err := sudoPrefix()
	if err != nil {
		return
	}
	run := func(args ...string) {
		if _, err := exec.LookPath(args[0]); err != nil {
			return
		}
		Run(ctx, "/", append(append([]string{}, sudo...), args...)...) //nolint:errcheck // best effort, see above
	}
	_, statErr := os.Stat("/run/systemd/system")
	systemd := statErr == nil
	for _, name := range services {
		if systemd {
			run("systemctl", "disable", "--now", name+".service")
		} else {
			run("invoke-rc.d", name, "stop")
		}
		run("deb-systemd-helper", "disable", name+".service") // the unit's links, made even without systemd
		run("update-rc.d", name, "disable")
	}
}

// sudoPrefix is nothing as root, else password-less sudo.
func sudoPrefix() ([]string, error) {
	if os.Geteuid() == 0 {
		return nil, nil
	}
	if _, err := exec.LookPath("sudo"); err != nil {
		return nil, errors.New("not root and no sudo to install it")
	}
	return []string{"sudo", "-n"}, nil
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

// Alive reports whether a process with this pid runs.
func Alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) != syscall.ESRCH
}

// Command is the name of process pid's program (/proc/<pid>/comm), or ""
// when it is gone.
func Command(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Terminate stops process pid with sig, then SIGKILL if it still runs after
// wait, and returns once it is gone (or after another wait).
func Terminate(pid int, sig syscall.Signal, wait time.Duration) error {
	for _, s := range []syscall.Signal{sig, syscall.SIGKILL} {
		if err := syscall.Kill(pid, s); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return nil
			}
			return fmt.Errorf("signal process %d: %w", pid, err)
		}
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
			if !Alive(pid) || strings.HasPrefix(processState(pid), "Z") {
				return nil
			}
			time.Sleep(50 * time.Millisecond) // polling for the exit
		}
	}
	return fmt.Errorf("process %d did not stop", pid)
}

// processState is the state letter of /proc/<pid>/stat ("Z": a zombie, gone
// but not yet reaped by its parent).
func processState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return string(b[i+2 : i+3])
	}
	return ""
}

// Parent is the pid of process pid's parent, or 0 when it is gone.
func Parent(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// startTime is when process pid started, in clock ticks since boot (field
// 22 of /proc/<pid>/stat), or "" when it is gone: with the pid, it names
// one process, not a later one that was given the same pid.
func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	if f := strings.Fields(s[i+1:]); len(f) > 19 {
		return f[19]
	}
	return ""
}

// RecordProcess writes to path the process a test service started: its pid
// and its start time. StopRecorded stops that process, and only it.
func RecordProcess(path string, pid int) error {
	st := startTime(pid)
	if st == "" {
		return fmt.Errorf("process %d is gone", pid)
	}
	return os.WriteFile(path, []byte(fmt.Sprintf("%d %s\n", pid, st)), 0o644)
}

// Recorded returns the pid recorded in path by RecordProcess when that very
// process (the same pid and start time) still runs program, and 0
// otherwise: nothing recorded, the process gone, or its pid now another's.
// A server of the same name in the same folder that this checkout did not
// start (another checkout's, a chroot's, the system's) is never it.
func Recorded(path, program string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 || Command(pid) != program || startTime(pid) != f[1] {
		return 0
	}
	return pid
}

// Executable is the file name of process pid's program (/proc/<pid>/exe,
// not truncated as its comm is), or "" when it cannot be read.
func Executable(pid int) string {
	path, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return ""
	}
	return filepath.Base(strings.TrimSuffix(path, " (deleted)"))
}
