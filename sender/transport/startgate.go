package transport

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A StartGate decides, at the last moment this process controls, whether a
// request may start now: the caller's pace (issue 59). Called with the
// time right before the request's first byte is written, it waits, if
// need be, until the request may start, and returns the instant the
// request starts (when it lets it), or an error: the request must not
// start, and nothing of it is written.
//
// A transport that sends over HTTP (webhook, whatsapp-cloud) calls it
// from inside the connection's write, after the connection was had (a
// dial, a pooled connection awaited) and the request serialised: what
// comes after it is one write system call. Over a client the transport
// did not build (Config.Client with a Transport of its own), it is called
// right before the request is handed to the client.
type StartGate func(now time.Time) (time.Time, error)

type startGateKey struct{}

// WithStartGate returns ctx carrying gate, for the request Send makes.
func WithStartGate(ctx context.Context, gate StartGate) context.Context {
	return context.WithValue(ctx, startGateKey{}, gate)
}

// GatesStarts is implemented by the transports whose Send calls the
// StartGate in its context; for any other, the caller calls it itself
// right before Send.
type GatesStarts interface{ GatesStarts() }

// GatesStarts: the webhook calls the StartGate (startgate.go).
func (*Webhook) GatesStarts() {}

// GatesStarts: the Cloud API calls the StartGate (startgate.go).
func (*WhatsApp) GatesStarts() {}

// gateCall is one request's StartGate, called at most once: by the
// connection's write (gatedConn), or by post before the client when the
// connection is not one of ours.
type gateCall struct {
	gate    StartGate
	once    sync.Once
	err     error
	started time.Time
}

func (g *gateCall) pass() error {
	g.once.Do(func() { g.started, g.err = g.gate(time.Now()) })
	return g.err
}

// refused returns the gate's refusal, if it was called and refused the
// request; called once the request is over.
func (g *gateCall) refused() error {
	g.once.Do(func() {}) // a gate never called refuses nothing
	return g.err
}

// gatedConn is a client connection that calls the gate of the request
// armed on it (by the trace's GotConn) right before that request's first
// write: an HTTP/1 connection carries one request at a time, so the next
// write after arming is the request's.
type gatedConn struct {
	net.Conn
	armed atomic.Pointer[gateCall]
}

func (c *gatedConn) Write(p []byte) (int, error) {
	if g := c.armed.Swap(nil); g != nil {
		if err := g.pass(); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

// gatedDial wraps dial's connections in gatedConn.
func gatedDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &gatedConn{Conn: conn}, nil
	}
}

// arm arms conn (a gatedConn, or a TLS connection over one) with g, and
// reports whether it could.
func arm(conn net.Conn, g *gateCall) bool {
	if tc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = tc.NetConn()
	}
	gc, ok := conn.(*gatedConn)
	if !ok {
		return false
	}
	gc.armed.Store(g)
	return true
}

// gateFrom returns the StartGate ctx carries, as a call to make once; nil
// when it carries none.
func gateFrom(ctx context.Context) *gateCall {
	gate, _ := ctx.Value(startGateKey{}).(StartGate)
	if gate == nil {
		return nil
	}
	return &gateCall{gate: gate}
}
