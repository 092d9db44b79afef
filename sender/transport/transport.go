// Package transport delivers queued engagement messages to their receiver:
// the bot's webhook, Meta's WhatsApp Cloud API, or a log (for dry runs).
//
// A transport makes one attempt per Send and classifies its failure with an
// *Error; retries, backoff, pacing and the delivery ledger are the caller's.
// Errors never carry the destination JID, the message text or any secret, so
// the caller may store and log them.
package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Delivery is one attempt to deliver one queued message.
type Delivery struct {
	ID             string            // the queue row's id (uuid string)
	UserID         string            //
	Type           string            // message_type, e.g. "goodbye", "weekly_review"
	Key            string            // message_key, e.g. "engagement.goodbye.self_select"
	Params         map[string]string // message_params
	Locale         string            // e.g. "pt-BR"
	Text           string            // rendered in the user's locale
	Destination    string            // "individual" | "group"
	DestinationJID string            //
	IdempotencyKey string            // the row's idempotency_key, or the row id when it has none
	Attempt        int               // counts from 1
	// MetaCategory is the template's latest Meta category as the caller
	// resolved it (MARKETING, UTILITY, AUTHENTICATION): the Cloud API
	// routes by it (whatsapp_categories.go). "": the templates file's.
	MetaCategory string
}

// Result is what a successful send returns.
type Result struct {
	ProviderMessageID string // e.g. the WhatsApp "wamid..." id; "" when the transport has none
}

// Error classifies a failed send for the caller's retry logic.
type Error struct {
	Err        error
	Permanent  bool          // retrying cannot help (e.g. HTTP 400, invalid recipient): fail the message now
	RetryAfter time.Duration // > 0 when the receiver asked for a delay (HTTP Retry-After, throttling)
	StatusCode int           // HTTP status when there was one
	// MaybeDelivered is true when the request was written and no response
	// came back (a timeout or a reset while waiting): the receiver may
	// have acted on it. A transport that cannot de-duplicate must not
	// send it again.
	MaybeDelivered bool
	// Unreachable is true when the request could not be written at all
	// (connection refused, no such host, the connection could not be
	// made in time): the receiver cannot have acted on it, and the
	// receiver as a whole, not this message, is the problem.
	Unreachable bool
	// ProviderCode is the provider's own error code when it gave one (the
	// Cloud API's error.code, e.g. 131050), else 0.
	ProviderCode int

	transport string // prefix of Error(), e.g. "webhook"
}

// Outage reports whether the failure says the receiver as a whole is down
// rather than anything about this message: it could not be reached, or a
// gateway in front of it answered 502, 503 or 504.
func (e *Error) Outage() bool {
	switch e.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return e.Unreachable
}

// Outcome classes of a send, as Class names them.
const (
	ClassAccepted  = "accepted"  // delivered (2xx)
	ClassRejected  = "rejected"  // the receiver refused this message for good
	ClassThrottled = "throttled" // the receiver asked to slow down; it did not take the message
	ClassUnknown   = "unknown"   // the request may have been acted on: no answer, or a server error after it was sent
	ClassOutage    = "outage"    // the receiver is down: unreachable, or a gateway's 502/503/504
	ClassTransient = "transient" // any other failure worth retrying
	ClassAccount   = "account"   // the receiver refused the whole account (an *AccountError), not the message
)

// Class names how a send ended, for logs and metrics: accepted, rejected,
// throttled, unknown, outage, transient or account. A nil err is accepted.
func Class(err error) string {
	var e *Error
	var acct *AccountError
	switch {
	case err == nil:
		return ClassAccepted
	case errors.As(err, &acct):
		return ClassAccount
	case !errors.As(err, &e):
		return ClassTransient
	case e.Permanent:
		return ClassRejected
	case e.MaybeDelivered:
		return ClassUnknown
	case e.Outage():
		return ClassOutage
	case e.StatusCode == http.StatusTooManyRequests || e.RetryAfter > 0:
		return ClassThrottled
	}
	return ClassTransient
}

// maxErrorLen bounds Error(): a stored error message stays short.
const maxErrorLen = 400

// Error returns a short, single-line description. It never includes the
// destination JID, the message text or secrets: transports build Err from
// sanitized parts only.
func (e *Error) Error() string {
	msg := "transport error"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if e.transport != "" {
		msg = e.transport + ": " + msg
	}
	return clip(oneLine(msg), maxErrorLen)
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Transport delivers messages.
type Transport interface {
	Name() string
	// Deduplicates reports whether the receiver drops a repeated delivery with the same
	// idempotency key, so an attempt whose outcome is unknown may be sent again.
	Deduplicates() bool
	Send(ctx context.Context, d Delivery) (Result, error) // error is *Error (use errors.As) for classified failures
}

// ReachoutLimited is a transport that sends as an ordinary WhatsApp
// account through an unofficial client (the webhook to a Baileys bot).
// WhatsApp refuses such an account's message to a user who has not written
// to it for 28 days (error 463, the reach-out timelock: Baileys keeps a
// contact's trusted-contact token for a rolling 28 days after they last
// wrote, https://github.com/WhiskeySockets/Baileys/pull/2339), so
// queue-process holds its messages to --reachout-window (docs/baileys.md).
// The Cloud API sends templates, which reach a user however long ago they
// wrote: it is not one.
type ReachoutLimited interface {
	Transport
	ReachoutLimited()
}

// Compile-time checks.
var (
	_ Transport = (*Webhook)(nil)
	_ Transport = (*WhatsApp)(nil)
	_ Transport = (*Log)(nil)
)

const (
	defaultTimeout = 10 * time.Second
	maxBody        = 64 << 10 // bytes of a response body read
	maxSnippet     = 200      // chars of a response body quoted in an error
	maxRetryAfter  = time.Hour
)

// sanitizedError carries a message built from sanitized parts while still
// unwrapping to its cause (whose own text may not be sanitized).
type sanitizedError struct {
	msg   string
	cause error
}

func (e *sanitizedError) Error() string { return e.msg }
func (e *sanitizedError) Unwrap() error { return e.cause }

// timeoutError is a request that outlived the transport's per-request
// Timeout. It is a net.Error with Timeout() true, and deliberately not
// context.DeadlineExceeded, which callers may take for their own shutdown.
type timeoutError struct{ after time.Duration }

func (e *timeoutError) Error() string {
	return "request timed out after " + e.after.String() + " (transient)"
}
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

// transientStatus reports whether an HTTP status is worth retrying.
func transientStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return status >= 500
}

// permanentStatus classifies a non-2xx status: true when retrying cannot
// help (other 4xx, and 3xx since redirects are never followed).
func permanentStatus(status int) bool { return !transientStatus(status) }

func successStatus(status int) bool { return status >= 200 && status <= 299 }

func classWord(permanent bool) string {
	if permanent {
		return "permanent"
	}
	return "transient"
}

// PermanentMark is how a failure's error message says that its transport
// classified it permanent, retrying cannot help: "webhook: HTTP 422
// (permanent)", "whatsapp: error 131047 (permanent), HTTP 400". Every
// transport writes it after the status, code or cause, and a transient
// failure says "(transient" instead; a stored error_message holding it is
// one such failure. Readers of the queue (the console's failure groups)
// recognise permanent failures by it rather than classify them again.
const PermanentMark = "(permanent"

// PermanentMessage reports whether an error message (an *Error's text, as
// the queue's error_message keeps it) says the failure is permanent.
func PermanentMessage(msg string) bool { return strings.Contains(msg, PermanentMark) }

// parseRetryAfter parses a Retry-After header, in delay-seconds or as an
// HTTP-date, into a delay capped at maxRetryAfter. Garbage, negative values
// and past dates give 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if isDigits(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > int64(maxRetryAfter/time.Second) { // overflow: all digits, so huge
			return maxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// noRedirect stops the client at a redirect: following one would turn a
// POST into a GET (301/302/303) or send credentials elsewhere.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// newClient returns a client that never follows redirects and keeps enough
// idle connections for concurrent workers: a copy of c, or a fresh client
// when c is nil.
func newClient(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	if out.Transport == nil {
		// The default keeps 2 idle connections per host; a queue-process
		// sends from several workers to one host and would reconnect for
		// nearly every message.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		dial := t.DialContext
		t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: c}, nil
		}
		out.Transport = t
	}
	out.CheckRedirect = noRedirect
	return &out
}

// countingConn counts the bytes written to a connection. httptrace's
// WroteRequest comes when a request is in the client's buffer, before the
// write system call; only the count says whether any of it left. A request
// refused by a write deadline (the delivery's wish bound and the pace's
// floor gate set one) wrote nothing, yet net/http may report the read
// side's "use of closed network connection" instead of the deadline: it
// was taken for maybe delivered, and a Cloud API message that never left
// failed for good as "outcome unknown" (issue 60's suite run).
type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// counted is c's countingConn, under its TLS if it has one; nil when the
// client's dialer is not newClient's (a client the caller gave).
func counted(c net.Conn) *countingConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	cc, _ := c.(*countingConn)
	return cc
}

// validateEndpoint checks that raw is an absolute http(s) URL. Its errors
// never quote raw, which may carry credentials.
func validateEndpoint(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return errors.New("URL is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("URL does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("URL must be absolute, with scheme http or https")
	}
	if u.Host == "" || u.Opaque != "" {
		return errors.New("URL has no host")
	}
	return nil
}

// httpCaller makes one POST with a per-request timeout and turns transport
// failures into *Error.
type httpCaller struct {
	name    string // the transport's name, prefixing errors
	client  *http.Client
	timeout time.Duration
}

// response is what came back: status, headers and at most maxBody bytes.
type response struct {
	status int
	header http.Header
	body   []byte
}

// noReplay makes req a request net/http never sends twice on its own.
//
// net/http's Transport sends a request again, on a new connection, when a
// kept-alive connection dies under it after the request was written, if
// the request is "replayable" (Request.isReplayable): a GET, HEAD,
// OPTIONS or TRACE, or any method whose header carries Idempotency-Key or
// X-Idempotency-Key, provided its body can be had again (GetBody, which
// http.NewRequest fills for a bytes.Reader). The webhook's request
// carries an Idempotency-Key, so the client resent it behind the delivery
// engine's back, skipping the check right before the send: a goodbye went
// out again 1.41 s after its user had answered (issue 55, finding 8). The
// same GetBody lets the client resend a request when nothing of it was
// written (Transport.shouldRetryRequest) and follow a 307 or 308 redirect,
// which the transports never do (noRedirect).
//
// Without GetBody none of that happens: a connection that dies under the
// request is an error the caller gets, MaybeDelivered if the request was
// written, and the engine decides, after its own check and pace slot,
// whether and when to send it again, under the same key. An HTTP/2
// connection's own retries (a GOAWAY or REFUSED_STREAM for a request the
// server says it never processed) need GetBody once the body was read, so
// they end the same way.
func noReplay(req *http.Request) { req.GetBody = nil }

// post sends body to endpoint, once: the HTTP client never sends it again
// on its own (noReplay). Failures before a response are *Error: the
// caller's ctx ending gives Err = ctx.Err(); anything else is transient,
// MaybeDelivered when the request had been written, and Unreachable when
// it could not be written on a connection of its own (a reused
// connection that died before the request was written says nothing of
// the receiver as a whole).
func (c *httpCaller) post(ctx context.Context, endpoint string, header http.Header, body []byte, red *redactor) (response, error) {
	if err := ctx.Err(); err != nil {
		return response{}, &Error{Err: err, transport: c.name}
	}
	reqCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var wrote, reused atomic.Bool
	// The connection's count of bytes written when it was handed over: if
	// it has not moved when the request fails, nothing of it left.
	var conn atomic.Pointer[countingConn]
	var before atomic.Int64
	reqCtx = httptrace.WithClientTrace(reqCtx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused {
				reused.Store(true)
			}
			if cc := counted(info.Conn); cc != nil {
				before.Store(cc.written.Load())
				conn.Store(cc)
			}
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	})
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		// The URL was validated at construction; don't quote it.
		return response{}, &Error{Err: &sanitizedError{msg: "cannot build request (permanent)", cause: err}, Permanent: true, transport: c.name}
	}
	req.Header = header
	noReplay(req)
	resp, err := c.client.Do(req)
	if err != nil {
		e := c.requestError(ctx, reqCtx, err, red)
		left := true // unknown without newClient's dialer: it may have
		if cc := conn.Load(); cc != nil {
			left = cc.written.Load() > before.Load()
		}
		e.MaybeDelivered = wrote.Load() && left && ctx.Err() == nil
		e.Unreachable = !wrote.Load() && !reused.Load() && ctx.Err() == nil
		return response{}, e
	}
	defer resp.Body.Close()
	// The status decides the outcome; a body cut short (even by a timeout)
	// only loses detail, so read errors are ignored.
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	_, _ = io.CopyN(io.Discard, resp.Body, maxBody) // let the connection be reused
	return response{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

func (c *httpCaller) requestError(ctx, reqCtx context.Context, err error, red *redactor) *Error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &Error{Err: ctxErr, transport: c.name}
	}
	if errors.Is(reqCtx.Err(), context.DeadlineExceeded) {
		return &Error{Err: &timeoutError{after: c.timeout}, transport: c.name}
	}
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		cause = ue.Err // url.Error quotes the URL, which may hold credentials
	}
	return &Error{
		Err:       &sanitizedError{msg: "request failed (transient): " + unquote(red.apply(cause.Error())), cause: cause},
		transport: c.name,
	}
}

// redactor removes sensitive values (JIDs, text, secrets), in the forms
// an echo of them takes, from the strings of network errors before they go
// into an error. Response bodies never go into an error at all. The forms
// are worked out only when a string is redacted: every send makes a
// redactor, few sends fail.
type redactor struct {
	values []string
}

// minRedact is the shortest value redacted: shorter ones are too common to
// identify anything, and redacting them would mangle the rest.
const minRedact = 3

func newRedactor(values ...string) *redactor { return &redactor{values: values} }

// forms lists every form of the values an echo may take, longest first,
// so a value containing another goes whole.
func (r *redactor) forms() []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if len(s) >= minRedact && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, v := range r.values {
		add(v)
		add(strings.TrimSpace(v))
		// The forms an echo of v takes in a JSON or form-encoded body.
		if b, err := json.Marshal(v); err == nil {
			add(string(b[1 : len(b)-1])) // HTML-escaped, as Go writes it
		}
		plain := jsonInner(v)
		add(plain)
		ascii := asciiEscape(plain) // as Python's json.dumps writes it
		add(ascii)
		add(upperEscapes(ascii))
		add(url.QueryEscape(v))
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// jsonInner is v as the inside of a JSON string, without HTML escaping.
func jsonInner(v string) string {
	b, err := marshalJSON(v)
	if err != nil || len(b) < 2 {
		return v
	}
	return string(b[1 : len(b)-1])
}

// asciiEscape escapes every non-ASCII character of s as \uxxxx (a
// surrogate pair beyond the BMP).
func asciiEscape(s string) string {
	var out strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			out.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return out.String()
}

// upperEscapes upper-cases the hex digits of the \uxxxx escapes of s.
func upperEscapes(s string) string {
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+6 <= len(s) && s[i+1] == 'u' {
			out.WriteString(`\u` + strings.ToUpper(s[i+2:i+6]))
			i += 5
			continue
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

func (r *redactor) apply(s string) string {
	if r == nil {
		return s
	}
	for _, v := range r.forms() {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}

// quoted matches what Go's errors quote of a response ("malformed HTTP
// response \"...\""): bytes from the network, which may echo the request.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// unquote replaces every quoted part of s with "…".
func unquote(s string) string { return quoted.ReplaceAllString(s, `"…"`) }

// oneLine replaces control characters and runs of white space with single
// spaces.
func oneLine(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// clip cuts s to at most n characters, marking the cut with "...".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-3]) + "..."
}

// httpError builds the *Error of a non-2xx response without a more specific
// classification: "HTTP 503 (transient, retry after 7s)". The body is never
// quoted: a receiver may echo the message's text or its recipient.
func httpError(name string, resp response) *Error {
	perm := permanentStatus(resp.status)
	e := &Error{Permanent: perm, StatusCode: resp.status, transport: name}
	if !perm {
		e.RetryAfter = parseRetryAfter(resp.header.Get("Retry-After"), time.Now())
	}
	msg := fmt.Sprintf("HTTP %d (%s", resp.status, classWord(perm))
	if e.RetryAfter > 0 {
		msg += ", retry after " + e.RetryAfter.String()
	}
	msg += ")"
	e.Err = errors.New(msg)
	return e
}
