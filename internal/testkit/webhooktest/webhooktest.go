// Package webhooktest is a misbehaving bot webhook for tests: a raw TCP
// listener on 127.0.0.1 that reads each HTTP request and answers it the way
// the test scripted for the message's Idempotency-Key — correctly, with a
// status, or not at all: hanging, resetting the connection, sending garbage
// or a truncated response. A connection carries one request and is closed
// after it, and every response says "Connection: close", unless the test
// scripts KeepAlive: its 200 keeps the connection open, and the client's
// next request on it (a reused, kept-alive connection) is read and answered
// by that request's own script, a Reset or Close included, which is how a
// kept-alive connection dies under a client.
package webhooktest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Request is one request the bot read.
type Request struct {
	At             time.Time // when its first byte was read
	IdempotencyKey string    // the header
	Body           Body
}

// Body is the part of the webhook body the tests look at.
type Body struct {
	ID             string `json:"id"`
	MessageType    string `json:"message_type"` // "probe" for a probe or a lookup (sender/transport.ProbeType)
	IdempotencyKey string `json:"idempotency_key"`
	Attempt        int    `json:"attempt"`
	DestinationJID string `json:"destination_jid"`
	Text           string `json:"text"`
}

// Fault is how the bot answers one request: it writes to (or withholds
// from) conn. The bot closes conn afterwards.
type Fault func(conn *net.TCPConn, req Request, done <-chan struct{})

// OK answers 200 with a JSON message id.
func OK() Fault {
	return func(conn *net.TCPConn, req Request, _ <-chan struct{}) {
		writeResponse(conn, 200, nil, `{"message_id":"bot-`+req.Body.ID+`"}`)
	}
}

// KeepAlive answers 200 like OK, without "Connection: close", and keeps
// the connection open for the client's next request, as most servers do.
func KeepAlive() Fault {
	return func(conn *net.TCPConn, req Request, _ <-chan struct{}) {
		body := `{"message_id":"bot-` + req.Body.ID + `"}`
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		kept.Store(conn, true)
	}
}

// kept holds the connections whose last answer was KeepAlive's: the bot
// reads their next request rather than close them.
var kept sync.Map

// Status answers status with header lines (like "Retry-After: 1") and body.
func Status(status int, body string, header ...string) Fault {
	return func(conn *net.TCPConn, _ Request, _ <-chan struct{}) { writeResponse(conn, status, header, body) }
}

// Echo422 rejects the message permanently with a body quoting its JID and
// text, as a careless bot might.
func Echo422() Fault {
	return func(conn *net.TCPConn, req Request, _ <-chan struct{}) {
		msg, _ := json.Marshal(map[string]string{"error": "cannot deliver to " + req.Body.DestinationJID + ": " + req.Body.Text})
		writeResponse(conn, 422, nil, string(msg))
	}
}

// Hang never answers (until the bot closes).
func Hang() Fault {
	return func(_ *net.TCPConn, _ Request, done <-chan struct{}) { <-done }
}

// SlowHeaders answers 200, but only after d.
func SlowHeaders(d time.Duration) Fault {
	return func(conn *net.TCPConn, req Request, done <-chan struct{}) {
		select {
		case <-time.After(d):
			OK()(conn, req, done)
		case <-done:
		}
	}
}

// SlowBody200 sends 200 and its headers at once, and the body after d.
func SlowBody200(d time.Duration) Fault {
	return func(conn *net.TCPConn, _ Request, done <-chan struct{}) {
		body := `{"message_id":"slow"}`
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(body))
		select {
		case <-time.After(d):
			_, _ = io.WriteString(conn, body)
		case <-done:
		}
	}
}

// Reset resets the connection (RST) without answering.
func Reset() Fault {
	return func(conn *net.TCPConn, _ Request, _ <-chan struct{}) { _ = conn.SetLinger(0) }
}

// Close closes the connection (FIN) without answering.
func Close() Fault {
	return func(*net.TCPConn, Request, <-chan struct{}) {}
}

// ResetMidHeaders sends part of a 200's header, then resets.
func ResetMidHeaders() Fault {
	return func(conn *net.TCPConn, _ Request, _ <-chan struct{}) {
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Ty")
		_ = conn.SetLinger(0)
	}
}

// Garbage answers with bytes that are not HTTP, quoting the message's JID
// and text (which must not reach an error message).
func Garbage() Fault {
	return func(conn *net.TCPConn, req Request, _ <-chan struct{}) {
		_, _ = io.WriteString(conn, "SSH-2.0 "+req.Body.DestinationJID+" "+req.Body.Text+"\r\n\x00\xff\xfe\r\n\r\n")
	}
}

// Truncated answers status with a Content-Length longer than the body it
// sends before closing.
func Truncated(status int) Fault {
	return func(conn *net.TCPConn, _ Request, _ <-chan struct{}) {
		fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: 500\r\nConnection: close\r\n\r\n{\"message_id\":", status, http.StatusText(status))
	}
}

// Junk200 answers 200 with a body that is not JSON, and a Content-Length
// shorter than what follows.
func Junk200() Fault {
	return func(conn *net.TCPConn, _ Request, _ <-chan struct{}) {
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4\r\nConnection: close\r\n\r\n\x00\xffjunk{{{ not json ]]]")
	}
}

func writeResponse(w io.Writer, status int, header []string, body string) {
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n", status, http.StatusText(status), len(body))
	for _, h := range header {
		fmt.Fprintf(w, "%s\r\n", h)
	}
	fmt.Fprintf(w, "\r\n%s", body)
}

// Bot is the misbehaving webhook.
type Bot struct {
	URL string

	ln      net.Listener
	mu      sync.Mutex
	scripts map[string][]Fault // by Idempotency-Key
	script  []Fault            // for keys without their own
	reqs    []Request
	done    chan struct{}
	wg      sync.WaitGroup
}

// New starts a bot that answers every message with script (the last fault
// repeats; OK when empty) until told otherwise with Script. It stops when
// the test ends.
func New(t testing.TB, script ...Fault) *Bot {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Bot{URL: "http://" + ln.Addr().String() + "/hook", ln: ln, scripts: map[string][]Fault{}, script: script, done: make(chan struct{})}
	b.wg.Go(b.serve)
	t.Cleanup(func() {
		close(b.done)
		ln.Close()
		b.wg.Wait()
	})
	return b
}

// Script sets the faults for the message with idempotency key key: the
// n-th request for it gets script[n] (the last repeats).
func (b *Bot) Script(key string, script ...Fault) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.scripts[key] = script
}

// Requests returns every request read so far, in order.
func (b *Bot) Requests() []Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Request(nil), b.reqs...)
}

// ByKey returns the requests for the message with idempotency key key.
func (b *Bot) ByKey(key string) []Request {
	var out []Request
	for _, r := range b.Requests() {
		if r.Body.IdempotencyKey == key || r.IdempotencyKey == key {
			out = append(out, r)
		}
	}
	return out
}

func (b *Bot) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Go(func() { b.handle(c.(*net.TCPConn)) })
	}
}

func (b *Bot) handle(conn *net.TCPConn) {
	defer conn.Close()
	closed := make(chan struct{})
	defer close(closed)
	go func() { // unblock a read when the bot stops
		select {
		case <-b.done:
			_ = conn.SetReadDeadline(time.Now())
		case <-closed:
		}
	}()
	rd := bufio.NewReader(conn)
	for b.answer(conn, rd) {
	}
}

// answer reads one request from conn and answers it by its script; it
// reports whether the answer keeps the connection open (KeepAlive).
func (b *Bot) answer(conn *net.TCPConn, rd *bufio.Reader) bool {
	// A request's time is when its first byte came, not when its body was
	// parsed: the wishes' bound is on when a request starts, and on a
	// busy machine the parsing is where this goroutine waits its turn.
	if _, err := rd.Peek(1); err != nil {
		return false
	}
	at := time.Now()
	req, err := http.ReadRequest(rd)
	if err != nil {
		return false
	}
	raw, err := io.ReadAll(req.Body)
	if err != nil {
		return false
	}
	r := Request{At: at, IdempotencyKey: req.Header.Get("Idempotency-Key")}
	_ = json.Unmarshal(raw, &r.Body)

	b.mu.Lock()
	script, ok := b.scripts[r.IdempotencyKey]
	if !ok {
		script = b.script
	}
	n := 0
	for _, prev := range b.reqs {
		if prev.IdempotencyKey == r.IdempotencyKey {
			n++
		}
	}
	b.reqs = append(b.reqs, r)
	b.mu.Unlock()

	fault := OK()
	if len(script) > 0 {
		fault = script[min(n, len(script)-1)]
	}
	fault(conn, r, b.done)
	_, keep := kept.LoadAndDelete(conn)
	return keep
}

// RetryAfter is a Retry-After header line of secs seconds.
func RetryAfter(secs int) string { return "Retry-After: " + strconv.Itoa(secs) }
