//go:build linux && (amd64 || arm64)

package webhooktest

import (
	"encoding/binary"
	"net"
	"syscall"
	"time"
)

// timespecSize is a struct timespec's size on the 64-bit platforms: two
// 64-bit integers, seconds and nanoseconds.
const timespecSize = 16

// stampArrivals has the kernel stamp every packet the listener's
// connections receive (SO_TIMESTAMPNS, which accepted connections
// inherit), so that a request's At is when its first byte reached the
// host, not when the bot's goroutine got to read it: on a busy machine
// the test process itself is descheduled for tens of milliseconds, which
// would make two requests seem closer than they came (issue 59).
func stampArrivals(ln net.Listener) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	})
}

// arrival waits for conn's next request to begin and returns when its
// first byte reached the host, as the kernel stamped it; ok is false when
// it cannot tell (the caller then takes the time it reads the request).
func arrival(conn *net.TCPConn) (time.Time, bool) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return time.Time{}, false
	}
	var (
		at  time.Time
		got bool
	)
	buf := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(timespecSize))
	readErr := rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, err := syscall.Recvmsg(int(fd), buf, oob, syscall.MSG_PEEK)
		if err == syscall.EAGAIN {
			return false // not yet: the poller waits for the first byte
		}
		if err != nil || n == 0 {
			return true
		}
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return true
		}
		for _, m := range msgs {
			if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_TIMESTAMPNS && len(m.Data) >= timespecSize {
				sec, nsec := binary.NativeEndian.Uint64(m.Data[0:8]), binary.NativeEndian.Uint64(m.Data[8:16])
				at, got = time.Unix(int64(sec), int64(nsec)), true //nolint:gosec // a timestamp's fields, in range
			}
		}
		return true
	})
	if readErr != nil {
		return time.Time{}, false
	}
	return at, got
}
