package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// CPU time, counted: on a busy 2-core machine a run's rate moves with the
// load, its CPU time per message much less. Two meters: the tool's own
// process (getrusage: the receiver, and the contenders that run inside it:
// bare, floor, River), and the PostgreSQL cluster's (its processes' times in
// /proc, the postmaster's children's included once they have exited).

// userHZ is the unit of the times in /proc/<pid>/stat (USER_HZ, 100 on
// Linux whatever the kernel's tick).
const userHZ = 100

// cpuMark is both meters' readings at one instant.
type cpuMark struct {
	tool   time.Duration
	server time.Duration // 0 when the server's processes are not readable
}

// cpuMeter reads the tool's CPU time and, when the server runs on this
// machine and its /proc is readable, the PostgreSQL cluster's.
type cpuMeter struct {
	postmaster int // 0: the server's CPU is not measured
}

// newCPUMeter finds the postmaster of dbURL's server: the parent of a
// backend. A server elsewhere (or in another pid namespace) is not
// measured: its CPU stays 0.
func newCPUMeter(ctx context.Context, dbURL string) (cpuMeter, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return cpuMeter{}, err
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return cpuMeter{}, err
	}
	st, err := readStat(backend)
	if err != nil || !strings.HasPrefix(st.comm, "postgres") {
		return cpuMeter{}, nil //nolint:nilerr // not on this machine: no server CPU
	}
	return cpuMeter{postmaster: st.ppid}, nil
}

// mark reads both meters.
func (m cpuMeter) mark() cpuMark {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	mk := cpuMark{tool: time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))}
	if m.postmaster > 0 {
		mk.server = m.serverCPU()
	}
	return mk
}

// since is the CPU seconds spent since from: the tool's and the server's.
func (m cpuMeter) since(from cpuMark) (tool, server float64) {
	now := m.mark()
	return (now.tool - from.tool).Seconds(), (now.server - from.server).Seconds()
}

// serverCPU is the cluster's CPU time so far: the postmaster's own and its
// exited children's (cutime, cstime), and its live children's. A backend
// that exits between the two reads may be counted twice or not at all:
// one connection's last moments.
func (m cpuMeter) serverCPU() time.Duration {
	var ticks int64
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil && st.ppid == m.postmaster {
			ticks += st.utime + st.stime
		}
	}
	if st, err := readStat(m.postmaster); err == nil {
		ticks += st.utime + st.stime + st.cutime + st.cstime
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// procStat is what the meters read of /proc/<pid>/stat.
type procStat struct {
	comm                         string
	ppid                         int
	utime, stime, cutime, cstime int64 // in 1/userHZ s
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')') // comm may hold spaces and parentheses
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	st := procStat{comm: s[open+1 : end]}
	st.ppid, _ = strconv.Atoi(f[1])
	for i, v := range []*int64{&st.utime, &st.stime, &st.cutime, &st.cstime} { // fields 14-17
		*v, _ = strconv.ParseInt(f[11+i], 10, 64)
	}
	return st, nil
}

// counters are a queue run's counts from its start: the receiver's
// requests and connections, the CPU meters' and the cluster's WAL.
type counters struct {
	dbURL           string
	hook            *webhook
	meter           cpuMeter
	cpu             cpuMark
	lsn             string
	requests, conns int64
}

// startCounters checkpoints dbURL's database (no run pays for another's
// writes) and starts counting; call it just before the timed part.
func startCounters(ctx context.Context, dbURL string, hook *webhook) (*counters, error) {
	if _, err := checkpoint(ctx, dbURL); err != nil {
		return nil, err
	}
	meter, err := newCPUMeter(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	lsn, err := walLSN(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	c := &counters{dbURL: dbURL, hook: hook, meter: meter, lsn: lsn, requests: hook.requests.Load(), conns: hook.conns.Load()}
	c.cpu = meter.mark()
	return c, nil
}

// stop fills r's counts since the start (its Messages set); call it just
// after the timed part.
func (c *counters) stop(ctx context.Context, r *queueRun) error {
	r.ToolCPU, r.ServerCPU = c.meter.since(c.cpu)
	r.Requests, r.Connections = c.hook.requests.Load()-c.requests, c.hook.conns.Load()-c.conns
	wal, err := walSince(ctx, c.dbURL, c.lsn)
	r.WALPerMessage = wal / float64(r.Messages)
	return err
}
