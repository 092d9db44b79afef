package pgtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
)

const (
	defaultPort = 54329

	// markerConf is written into every data directory this package creates
	// (and included from its postgresql.conf); its presence is what makes a
	// directory "ours" to stop or re-create.
	markerConf = "engagement-pgtest.conf"
)

// throwawayConfig returns the data directory and port of the throwaway
// cluster, from PGTEST_DIR and PGTEST_PORT or the defaults (defaultDir).
func throwawayConfig() (dir string, port int, err error) {
	dir = os.Getenv("PGTEST_DIR")
	if dir == "" {
		dir = defaultDir()
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", 0, err
	}
	port = defaultPort
	if p := os.Getenv("PGTEST_PORT"); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port <= 0 || port > 65535 {
			return "", 0, fmt.Errorf("PGTEST_PORT=%q is not a port number", p)
		}
	}
	return dir, port, nil
}

// startedHere is set once this process has started the shared throwaway
// cluster (rather than found it running); stopsThrowaway once the program
// said it stops the cluster it starts (WillStopThrowaway).
var startedHere, stopsThrowaway atomic.Bool

// WillStopThrowaway tells pgtest that this program stops the throwaway
// cluster before it exits if it started it (StartedThrowaway, then
// StopThrowaway), as the demo does, so that pgtest's notice on stderr says
// so instead of saying that the cluster stays running. Call it before the
// first ServerURL.
func WillStopThrowaway() { stopsThrowaway.Store(true) }

// throwawayNotice is the line pgtest prints when it uses the throwaway
// cluster in dir: whether this process started it, and whether it keeps
// running after this program.
func throwawayNotice(dir string, port int, started, willStop bool) string {
	where := fmt.Sprintf("the throwaway PostgreSQL cluster in %s on 127.0.0.1:%d (log %s.log)", dir, port, dir)
	switch {
	case started && willStop:
		return "pgtest: started " + where + "; it is stopped when this program ends"
	case started:
		return "pgtest: started " + where + "; it stays running for the next run; stop it with `make services-stop` (or pg_ctl -D " + dir + " stop)"
	}
	return "pgtest: using " + where + ", already running; it stays running; stop it with `make services-stop` (or pg_ctl -D " + dir + " stop)"
}

// StartedThrowaway reports whether this process started the throwaway
// cluster, so that a program like the demo can stop what it started and
// leave alone what it found.
func StartedThrowaway() bool { return startedHere.Load() }

// StopThrowaway stops the throwaway cluster (PGTEST_DIR, or the default data
// directory) if this package created it and it is running, and returns a
// line saying what it stopped ("" when nothing was running).
func StopThrowaway() (string, error) {
	dir, port, err := throwawayConfig()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stopped, err := stopThrowaway(ctx, dir)
	if err != nil || !stopped {
		return "", err
	}
	return fmt.Sprintf("stopped the throwaway PostgreSQL cluster in %s (127.0.0.1:%d)", dir, port), nil
}

func throwawayURL(port int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

// startThrowaway makes sure a PostgreSQL cluster with data directory dir
// answers on 127.0.0.1:port, creating and starting it if needed, and returns
// its URL (user postgres, database postgres) and whether it started it.
// Only a cluster that streams (a primary of a standby) writes the WAL a
// standby needs; the others write the least (see writeConf).
func startThrowaway(ctx context.Context, dir string, port int, streams bool) (dbURL string, started bool, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", false, err
	}
	dbURL = throwawayURL(port)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", false, err
	}
	unlock, err := localsvc.LockFile(ctx, dir+".lock")
	if err != nil {
		return "", false, err
	}
	defer unlock()

	if ping(ctx, dbURL) == nil {
		// Already running (started by an earlier run or a racing
		// process), if it is the cluster in dir: a server of another
		// checkout's (or a chroot's, or anyone's) may hold the port.
		if err := checkOwn(ctx, dbURL, dir, port); err != nil {
			return "", false, portTaken{err}
		}
		return dbURL, false, nil
	}
	bins, err := findOrInstallPostgres(ctx)
	if err != nil {
		return "", false, err
	}
	owner, err := clusterOwner(ctx)
	if err != nil {
		return "", false, err
	}

	if err := prepareDataDir(ctx, bins, owner, dir); err != nil {
		return "", false, err
	}
	if err := writeConf(dir, port, owner, streams); err != nil {
		return "", false, err
	}
	logPath := dir + ".log"
	if owner != nil {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return "", false, err
		}
		f.Close()
		if err := owner.chown(logPath); err != nil {
			return "", false, err
		}
	}
	_, err = runPG(ctx, owner, bins.pgCtl, "-D", dir, "-l", logPath, "-w", "-t", "120", "-o", "-p "+strconv.Itoa(port), "start")
	if err != nil {
		tail := localsvc.Tail(logPath, 20)
		err = fmt.Errorf("%w\nlast lines of %s:\n%s\n(is port %d taken by another program? set PGTEST_PORT)", err, logPath, tail, port)
		if strings.Contains(tail, "Address already in use") {
			err = portTaken{err}
		}
		return "", false, err
	}
	// What a stop may stop: this postmaster, by its pid and start time.
	if err := localsvc.RecordProcess(startedFile(dir), postmasterPid(dir)); err != nil {
		return "", true, fmt.Errorf("record the cluster started in %s: %w", dir, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ping(ctx, dbURL)
		if err == nil {
			return dbURL, true, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", true, fmt.Errorf("the cluster in %s started but %s does not answer: %w\nlast lines of %s:\n%s", dir, dbURL, err, logPath, localsvc.Tail(logPath, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// portTaken is startThrowaway's error when another program holds the
// port: a server that is not the cluster's answers on it, or the server
// could not bind it.
type portTaken struct{ error }

func (e portTaken) Unwrap() error { return e.error }

// startOnFreePort starts the cluster in dir (startThrowaway) on the
// loopback port pick gives (freePort). A port taken between its choosing
// and the server's binding it (by another test's server, or as the local
// end of one of the suite's thousands of outgoing connections) is tried
// again with another, three times in all.
func startOnFreePort(ctx context.Context, dir string, streams bool, pick func() (int, error)) (string, error) {
	var err error
	for range 3 {
		var port int
		if port, err = pick(); err != nil {
			return "", err
		}
		var srv string
		if srv, _, err = startThrowaway(ctx, dir, port, streams); !errors.As(err, new(portTaken)) {
			return srv, err
		}
	}
	return "", err
}

// checkOwn returns an error unless the server answering dbURL on port is
// the cluster whose data directory is dir: its data_directory is dir, and
// its system identifier (a random number initdb draws, which a cluster of
// the same path in another checkout, chroot or container does not share)
// is the one in dir's pg_control. The error says whose it is and what to do.
func checkOwn(ctx context.Context, dbURL, dir string, port int) error {
	theirs, theirID, err := serverIdentity(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("127.0.0.1:%d answers, but does not say which cluster it is (%w): pgtest does not use a server it cannot tell "+
			"is its cluster in %s. %s", port, err, dir, foreignAdvice)
	}
	ownID, ownErr := systemIdentifier(dir)
	if ownErr == nil && theirID == ownID && samePath(theirs, dir) {
		return nil
	}
	mine := fmt.Sprintf("this one's is %d", ownID)
	if ownErr != nil {
		mine = ownErr.Error()
	}
	return fmt.Errorf("127.0.0.1:%d answers, but not with the throwaway cluster in %s: it is the cluster in %s, system identifier %d (%s), "+
		"another checkout's or another program's, and pgtest does not use it. %s", port, dir, theirs, theirID, mine, foreignAdvice)
}

// foreignAdvice is what checkOwn's refusals say to do.
const foreignAdvice = "Stop that server, or set PGTEST_PORT to a free port (and PGTEST_DIR to a directory of this checkout's), or DATABASE_URL to a server to use"

// serverIdentity asks the server at dbURL for its data directory and its
// system identifier.
func serverIdentity(ctx context.Context, dbURL string) (dataDir string, id uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := connect(ctx, dbURL)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(context.Background())
	server, err := kitServerIdentityQuery.One(ctx, conn, sqlfile.None{})
	switch {
	case err != nil:
		return "", 0, err
	case server.SystemIdentifier == nil:
		return "", 0, errors.New("the server has no system identifier")
	}
	return server.DataDirectory, uint64(*server.SystemIdentifier), nil // bigint: the identifier's bits
}

// systemIdentifier reads the system identifier of the cluster in dir: the
// first field of global/pg_control (uint64, in the machine's byte order).
func systemIdentifier(dir string) (uint64, error) {
	f, err := os.Open(filepath.Join(dir, "global", "pg_control"))
	if err != nil {
		return 0, fmt.Errorf("this checkout's cluster: %w", err)
	}
	defer f.Close()
	var b [8]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return 0, fmt.Errorf("this checkout's cluster: read %s: %w", f.Name(), err)
	}
	return binary.NativeEndian.Uint64(b[:]), nil
}

// samePath reports whether a and b name the same directory, through
// symbolic links.
func samePath(a, b string) bool {
	if a == b {
		return true
	}
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

// prepareDataDir runs initdb unless dir already holds a cluster of the
// installed major version. initdb works in a side directory that is renamed
// into place when complete, so an interrupted initdb never leaves a broken dir.
func prepareDataDir(ctx context.Context, bins pgBinaries, owner *osUser, dir string) error {
	if v, err := os.ReadFile(filepath.Join(dir, "PG_VERSION")); err == nil {
		have := strings.TrimSpace(string(v))
		if have == bins.major || bins.major == "" {
			return nil
		}
		if _, err := os.Stat(filepath.Join(dir, markerConf)); err != nil {
			return fmt.Errorf("%s holds a PostgreSQL %s cluster that pgtest did not create, but the installed binaries are version %s; remove it or set PGTEST_DIR", dir, have, bins.major)
		}
		// Our own throwaway cluster from an older PostgreSQL: start afresh.
		runPG(ctx, owner, bins.pgCtl, "-D", dir, "stop", "-m", "immediate") //nolint:errcheck // usually not running
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	} else if entries, err := os.ReadDir(dir); err == nil {
		if len(entries) > 0 {
			return fmt.Errorf("%s exists but is not a PostgreSQL data directory; remove it or set PGTEST_DIR", dir)
		}
		if err := os.Remove(dir); err != nil {
			return err
		}
	}

	tmp := dir + ".init"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	if owner != nil {
		if err := owner.chown(tmp); err != nil {
			return err
		}
	}
	locale := "C"
	if _, err := os.Stat("/usr/lib/locale/C.utf8"); err == nil {
		locale = "C.UTF-8" // C sort order, but Unicode-aware lower()/upper()
	}
	if _, err := runPG(ctx, owner, bins.initdb, "-D", tmp, "--auth=trust", "-U", "postgres",
		"--encoding=UTF8", "--locale="+locale, "--no-sync"); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	conf, err := os.OpenFile(filepath.Join(tmp, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = fmt.Fprintf(conf, "\n# Settings of the engagement test cluster (internal/testkit/pgtest), rewritten at every start.\ninclude_if_exists '%s'\n", markerConf)
		if cerr := conf.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return os.Rename(tmp, dir)
}

// writeConf (re)writes the included settings file: address, port, socket and
// the speed-over-durability settings. A cluster that does not stream to a
// standby has wal_level minimal: CREATE DATABASE then copies a test's
// database without writing every page of it to the WAL (half its server
// CPU), and so do the tests' bulk loads into tables of their transaction.
func writeConf(dir string, port int, owner *osUser, streams bool) error {
	socketDir := dir
	if len(dir)+len("/.s.PGSQL.")+len(strconv.Itoa(port)) >= 107 { // sun_path is 108 bytes with its NUL
		socketDir = "" // path too long for a unix socket: TCP only
	}
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	content := fmt.Sprintf(`# Written by the engagement scheduler's internal/testkit/pgtest at every start; edits are lost.
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = %s
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_buffers = 256MB
`, port, q(socketDir))
	if !streams {
		content += "wal_level = minimal\nmax_wal_senders = 0\n"
	}
	path := filepath.Join(dir, markerConf)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return err
	}
	if owner != nil {
		return owner.chown(path)
	}
	return nil
}

// stopThrowaway stops the cluster in dir if pgtest created it and it runs.
func stopThrowaway(ctx context.Context, dir string) (stopped bool, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	for _, f := range []string{"PG_VERSION", markerConf} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false, nil // no cluster of ours there
		}
	}
	unlock, err := localsvc.LockFile(ctx, dir+".lock")
	if err != nil {
		return false, err
	}
	defer unlock()
	bins, err := findPostgres()
	if err != nil {
		return false, err
	}
	var owner *osUser
	if os.Geteuid() == 0 {
		if owner, err = lookupUser("postgres"); err != nil {
			return false, err
		}
	}
	// Only the postmaster this package started and recorded, still the
	// one dir's postmaster.pid names: pg_ctl signals whatever pid that
	// file holds, and a stale one (a chroot's, a crashed cluster's) may
	// name another program's server.
	pid := localsvc.Recorded(startedFile(dir), "postgres")
	if pid == 0 || postmasterPid(dir) != pid {
		return false, nil // not running, or not ours
	}
	if _, err := runPG(ctx, owner, bins.pgCtl, "-D", dir, "status"); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 3 {
			return false, nil // not running
		}
		return false, err
	}
	if _, err = runPG(ctx, owner, bins.pgCtl, "-D", dir, "-w", "-t", "60", "-m", "fast", "stop"); err != nil {
		return false, err
	}
	os.Remove(startedFile(dir))
	return true, nil
}

// startedFile, beside a cluster's data directory, records the postmaster
// startThrowaway started there (localsvc.RecordProcess).
func startedFile(dir string) string { return dir + ".started" }

// postmasterPid is the pid on the first line of dir's postmaster.pid, or 0.
func postmasterPid(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

type pgBinaries struct {
	pgCtl, initdb string
	major         string // e.g. "15"; empty when unknown
}

// findPostgres finds pg_ctl and initdb in PATH, else in the newest
// /usr/lib/postgresql/*/bin.
func findPostgres() (pgBinaries, error) {
	var b pgBinaries
	if ctl, err := exec.LookPath("pg_ctl"); err == nil {
		b.pgCtl = ctl
		if sibling := filepath.Join(filepath.Dir(ctl), "initdb"); isExecutable(sibling) {
			b.initdb = sibling
		} else if initdb, err := exec.LookPath("initdb"); err == nil {
			b.initdb = initdb
		}
	}
	if b.pgCtl == "" || b.initdb == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
		for _, d := range dirs {
			if isExecutable(filepath.Join(d, "pg_ctl")) && isExecutable(filepath.Join(d, "initdb")) {
				b.pgCtl, b.initdb = filepath.Join(d, "pg_ctl"), filepath.Join(d, "initdb")
				break
			}
		}
	}
	if b.pgCtl == "" || b.initdb == "" {
		return b, errors.New("pg_ctl and initdb are neither in PATH nor in /usr/lib/postgresql/*/bin")
	}
	// "pg_ctl (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)" -> "15"
	if out, err := exec.Command(b.pgCtl, "--version").Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) >= 3 {
			b.major, _, _ = strings.Cut(f[2], ".")
		}
	}
	return b, nil
}

func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// findOrInstallPostgres finds the server binaries, installing the Debian
// postgresql package (apt-get, as root or through sudo -n) when they are
// missing; the package's system service is left stopped and disabled (the
// tests run a cluster of their own).
func findOrInstallPostgres(ctx context.Context) (pgBinaries, error) {
	b, err := findPostgres()
	if err == nil {
		return b, nil
	}
	hint := fmt.Sprintf("%v; install the postgresql package (apt-get install --no-install-recommends postgresql) or set DATABASE_URL", err)
	if err := localsvc.AptInstall(ctx, "pgtest", "postgresql", hint, "postgresql"); err != nil {
		return b, err
	}
	if b, err = findPostgres(); err != nil {
		return b, fmt.Errorf("%w even after installing the postgresql package", err)
	}
	return b, nil
}

// osUser is the system user the cluster runs as when we are root.
type osUser struct{ uid, gid int }

func (u *osUser) chown(path string) error { return os.Chown(path, u.uid, u.gid) }

// clusterOwner returns nil when not root (the cluster runs as us), else the
// postgres system user, created if missing: initdb and postgres refuse root.
func clusterOwner(ctx context.Context) (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if _, err := localsvc.Run(ctx, "/", "id", "postgres"); err != nil {
		if _, err := localsvc.Run(ctx, "/", "useradd", "--system", "--home-dir", "/var/lib/postgresql", "--shell", "/bin/bash", "postgres"); err != nil {
			return nil, fmt.Errorf("create the postgres system user (initdb and postgres refuse to run as root): %w", err)
		}
	}
	return lookupUser("postgres")
}

func lookupUser(name string) (*osUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, err
	}
	return &osUser{uid: uid, gid: gid}, nil
}

// runPG runs a PostgreSQL program, as the postgres user when owner is set.
func runPG(ctx context.Context, owner *osUser, args ...string) (string, error) {
	if owner != nil {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	return localsvc.Run(ctx, "/", args...)
}

// ping connects to dbURL and pings it, giving up after about 2 seconds.
func ping(ctx context.Context, dbURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}
