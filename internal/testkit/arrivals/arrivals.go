// Package arrivals stamps a test server's requests with the kernel's
// receive time of their bytes (SO_TIMESTAMPNS) rather than the time a
// handler runs. On a busy machine a receiver's handler runs tens, even
// hundreds, of milliseconds late (two CPU burners, load 17 on 2 cores: up
// to 200 ms), and two requests written 100 ms apart look like a burst; the
// kernel stamps a loopback request in the sender's write, whatever the
// receiver's scheduling. Linux only.
//
// Wrap a server's listener with Listener and set its ConnContext to
// ConnContext; a handler's At(r) is then when r's bytes arrived. The stamp
// is the connection's last read: the server reads a request before it runs
// the handler, and on HTTP/1.1 the next request on the connection comes
// after this one's answer, so At is right at the start of a handler (before
// a background read of the next request can begin).
package arrivals

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Listener returns ln with SO_TIMESTAMPNS turned on for each TCP
// connection it accepts, and their reads stamped. It is turned on the
// listening socket too, at once: the kernel stamps nothing while no socket
// asks, and a connection's first request may be in before Accept returns.
func Listener(ln net.Listener) net.Listener {
	if tl, ok := ln.(*net.TCPListener); ok {
		if raw, err := tl.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) {
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
			})
		}
	}
	return listener{ln}
}

// ConnContext is an http.Server's ConnContext that lets At find a
// request's connection, beneath a TLS connection (or any wrapper with
// NetConn) too: the stamp is then the arrival of the record carrying the
// request.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	return context.WithValue(ctx, connKey{}, c)
}

// At is when r's bytes arrived, by the kernel's clock; the zero time if r
// did not come through Listener and ConnContext (or no stamp came).
func At(r *http.Request) time.Time {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok {
		return time.Time{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

type connKey struct{}

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		_ = c.Close()
		return nil, errors.Join(err, serr)
	}
	return &conn{TCPConn: tc, raw: raw}, nil
}

// conn reads with recvmsg and keeps the kernel's time of its last bytes.
type conn struct {
	*net.TCPConn
	raw  syscall.RawConn
	mu   sync.Mutex
	last time.Time
}

func (c *conn) Read(p []byte) (int, error) {
	var n int
	var rerr error
	oob := make([]byte, 64)
	err := c.raw.Read(func(fd uintptr) bool {
		var oobn int
		n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), p, oob, 0)
		if errors.Is(rerr, syscall.EAGAIN) {
			return false // wait for the socket to be readable
		}
		msgs, _ := syscall.ParseSocketControlMessage(oob[:max(oobn, 0)])
		for _, m := range msgs {
			if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
				sec, nsec := binary.NativeEndian.Uint64(m.Data[:8]), binary.NativeEndian.Uint64(m.Data[8:16])
				c.mu.Lock()
				c.last = time.Unix(int64(sec), int64(nsec)) //nolint:gosec // a timespec's fields
				c.mu.Unlock()
			}
		}
		return true
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}
