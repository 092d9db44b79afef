// Package browsertest gives tests a real browser: Debian's headless Chromium,
// driven through the DevTools protocol by chromedp, for the browser tests of
// the web console that a test serves on 127.0.0.1 with httptest. Like pgtest
// for PostgreSQL, there is no stand-in: a page that only breaks in a browser
// breaks here too.
//
// Chromium is the Debian package chromium (/usr/bin/chromium). When it is
// missing, the first New installs it with apt-get through localsvc (as root,
// or through sudo -n), once per process; `make test-deps` installs it ahead
// of time. No browser is ever downloaded any other way.
//
// Each New starts a browser of the test's own, with a fresh profile, so that
// no cookie, cache or storage leaks from one test into another, and stops it
// in t.Cleanup; or, in a package whose TestMain called Share, opens the
// test's tab in a browser context of its own (an incognito profile: its
// own cookies, cache and storage, dropped with it) in one browser the
// test process shares, which saves a browser's start, about a second of
// CPU, per test. For the whole life of the tab it collects what a developer
// would see in red in the DevTools console: console.error and console.assert
// calls, uncaught exceptions, error entries of the browser log, and requests
// to the page's own origin that failed or were answered with a status of 400
// or more (unless the test said it expects them, ExpectStatus). Errors lists
// them; RequireNoErrors fails the test when there is any, so that a test that
// clicks through the console also notices the script errors it did not look
// for.
package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
)

const (
	packageName = "chromium"
	binaryPath  = "/usr/bin/chromium"

	// setupTimeout bounds finding Chromium, which may include apt-get.
	setupTimeout = 15 * time.Minute

	// Timeout bounds starting the browser and each Run, Screenshot and
	// Errors: generous, because a page that loads in a second on a laptop
	// can take many times that on a busy two-core CI machine.
	Timeout = 60 * time.Second

	// width and height are the browser window's, a laptop's screen.
	width, height = 1280, 900
)

var binary = localsvc.Resolver{Timeout: setupTimeout, Find: findOrInstall}

// New starts a headless Chromium of t's own and returns the context of its
// one tab, for chromedp's actions (or Run). The browser runs with a fresh,
// temporary profile directory and a 1280x900 window; in t.Cleanup it is
// stopped and its directory removed. From the tab's first moment on, the
// page's errors are collected (see the package comment, and Errors). Any
// failure is fatal.
func New(t testing.TB) context.Context {
	t.Helper()
	if sharing.Load() {
		return newInShared(t)
	}
	setupCtx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	bin, err := binary.URL(setupCtx)
	if err != nil {
		t.Fatalf("browsertest: no Chromium: %v", err)
	}
	allocCtx, output, stop, err := allocator(bin)
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{requests: map[network.RequestID]*request{}}
	// WithListener, not Listen: it sees the tab's events from before the
	// first command, so nothing the page reports is missed.
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(c.listen))
	t.Cleanup(func() {
		cancelTab()
		stop() // waits for the browser to exit
	})
	if err := startTab(tabCtx, cancelTab); err != nil {
		t.Fatalf("browsertest: start %s: %v\nits last output:\n%s", bin, err, output.String())
	}
	keepOnFailure(t, tabCtx)
	return context.WithValue(tabCtx, collectorKey{}, c)
}

// allocator returns the context that starts a headless Chromium (bin) with
// a fresh, temporary profile directory, the browser's output, and the
// function that stops the browser and removes the directory.
func allocator(bin string) (context.Context, *tailBuffer, func(), error) {
	dir, err := os.MkdirTemp("", "browsertest-profile-")
	if err != nil {
		return nil, nil, nil, err
	}
	// Chromium's own temporary files (its shared memory, with
	// --disable-dev-shm-usage) go into the profile directory, removed with
	// it, not into /tmp, where a killed browser leaves them behind.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	output := &tailBuffer{max: 16 << 10}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(dir),
		chromedp.Env("TMPDIR="+tmp),
		chromedp.Headless,
		chromedp.NoSandbox, // as root, Chromium refuses to start with its sandbox
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// /dev/shm is small in containers, and Chromium crashes when it is full.
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
		chromedp.CombinedOutput(output),
	)
	return allocCtx, output, func() {
		cancelAlloc() // waits for the browser to exit
		os.RemoveAll(dir)
	}, nil
}

// startTab runs the first command in the tab of tabCtx, which starts the
// browser (or, in a shared one, the tab) and binds it to the context it
// gets, so it must get the tab's own context, without a deadline; a timer
// bounds the start instead, cancelling the tab (cancelTab) at Timeout.
func startTab(tabCtx context.Context, cancelTab func()) error {
	var timedOut atomic.Bool
	timer := time.AfterFunc(Timeout, func() { timedOut.Store(true); cancelTab() })
	// chromedp enables the log domain of a new tab too; enabling it here
	// keeps the browser log's errors collected should that ever change.
	err := chromedp.Do(tabCtx, chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		_, err := cdp.Call(ctx, tgt, log.Enable, cdp.Empty{})
		return err
	}))
	if !timer.Stop() && timedOut.Load() {
		err = fmt.Errorf("not started within %s", Timeout)
	}
	return err
}

// sharing is set by Share: New opens tabs in the shared browser.
var sharing atomic.Bool

// shared is the browser the process shares once Share was called, started
// by the first New.
var shared struct {
	sync.Mutex
	ctx    context.Context // the browser's first tab: new browser contexts are made from it
	output *tailBuffer
	stop   func()
	err    error
}

// Share makes every later New of the process open the test's tab in a
// browser context of its own in one browser the process shares (started
// by the first New), rather than start a browser per test. A browser
// context is what an incognito window is: its cookies, cache and storage
// are its own and are dropped with it, so tests see no more of each
// other than with a browser each, and may run in parallel. It returns the
// function that stops the shared browser: call it once the tests ended,
// from TestMain,
//
//	func TestMain(m *testing.M) { cmdtest.Main(m, browsertest.Share()) }
//
// (the browser would die with the process anyway, but leave its profile
// directory behind).
func Share() (stop func()) {
	sharing.Store(true)
	return func() {
		shared.Lock()
		defer shared.Unlock()
		if shared.stop != nil {
			shared.stop()
			shared.stop, shared.ctx = nil, nil
		}
		shared.err = errors.New("the shared browser is stopped")
	}
}

// sharedBrowser returns the context of the shared browser's first tab,
// starting the browser on first use, and its output.
func sharedBrowser() (context.Context, *tailBuffer, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.ctx != nil || shared.err != nil {
		return shared.ctx, shared.output, shared.err
	}
	setupCtx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	bin, err := binary.URL(setupCtx)
	if err != nil {
		shared.err = fmt.Errorf("no Chromium: %w", err)
		return nil, nil, shared.err
	}
	allocCtx, output, stop, err := allocator(bin)
	if err != nil {
		shared.err = err
		return nil, nil, err
	}
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	if err := startTab(browserCtx, cancelBrowser); err != nil {
		cancelBrowser()
		stop()
		shared.err = fmt.Errorf("start %s: %w\nits last output:\n%s", bin, err, output.String())
		return nil, nil, shared.err
	}
	shared.ctx, shared.output = browserCtx, output
	shared.stop = func() {
		cancelBrowser()
		stop()
	}
	return shared.ctx, shared.output, nil
}

// newInShared is New in the shared browser: the test's tab in a browser
// context of its own, closed with it in t.Cleanup.
func newInShared(t testing.TB) context.Context {
	t.Helper()
	browserCtx, output, err := sharedBrowser()
	if err != nil {
		t.Fatalf("browsertest: the shared browser: %v", err)
	}
	c := &collector{requests: map[network.RequestID]*request{}}
	tabCtx, cancelTab := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext(), chromedp.WithListener(c.listen))
	t.Cleanup(func() {
		cancelTab()
		_ = chromedp.Cancel(tabCtx) // waits until the tab is closed and its browser context disposed
	})
	if err := startTab(tabCtx, cancelTab); err != nil {
		t.Fatalf("browsertest: open a tab in the shared browser: %v\nits last output:\n%s", err, output.String())
	}
	keepOnFailure(t, tabCtx)
	return context.WithValue(tabCtx, collectorKey{}, c)
}

// Run runs actions in order in the tab of ctx (from New), within Timeout,
// and fails the test with the first action's error. It spares each browser
// test the same few lines of timeout and error handling.
//
// Run returns once the page is loaded (document.readyState "complete"),
// whatever the last action waited for: Chromium pushes a new document to
// the DevTools client at DOMContentLoaded, after the deferred scripts ran,
// and every node id found before it is then gone. A page a click loaded
// shows its elements (WaitVisible) before that, and a query of one of
// them in between failed "No node with given id found", on a busy machine.
func Run(t testing.TB, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, append(actions, loaded)...); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
}

// loaded waits until the tab's page is loaded. It asks the page itself
// (Runtime.evaluate in its main world), as chromedp's Poll and Evaluate
// wait for a document chromedp has seen, which a tab that never navigated
// has not.
// An evaluation that fails is tried again: a page that navigates on its
// own (a script submitting a form) destroys the context it runs in.
var loaded = chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
	for {
		res, err := cdp.Call(ctx, tgt, runtime.Evaluate, runtime.EvaluateParams{
			Expression: "document.readyState", ReturnByValue: new(true),
		})
		if err == nil && res.Result != nil && string(res.Result.Value) == `"complete"` {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the page to load: %w", errors.Join(ctx.Err(), err))
		case <-time.After(10 * time.Millisecond):
		}
	}
})

// ScreenshotsEnv names the environment variable that holds the folder Shot
// saves its screenshots in (make screenshots sets it to docs/console).
const ScreenshotsEnv = "CONSOLE_SCREENSHOTS"

// Shot saves a screenshot of the tab of ctx, the whole page, as name in the
// folder ScreenshotsEnv names, for people to look at (make screenshots);
// with it unset it takes none. A picture that nobody keeps cost Chromium
// about a fifth of the browser tests' CPU; a test that fails keeps one of
// its tab anyway (New).
func Shot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	if dir := os.Getenv(ScreenshotsEnv); dir != "" {
		Screenshot(t, ctx, filepath.Join(dir, name))
	}
}

// keepOnFailure saves a screenshot of the tab of ctx when t fails, in a
// folder of the system's temporary directory that outlives the test, and
// logs where: what a failing browser test leaves behind to look at. It runs
// before the tab closes (cleanups run last registered first).
func keepOnFailure(t testing.TB, ctx context.Context) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + ".png"
		path := filepath.Join(os.TempDir(), "browsertest-failures", name)
		sctx, cancel := context.WithTimeout(ctx, Timeout)
		defer cancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.MkdirAll(filepath.Dir(path), 0o755)
		}
		if err == nil {
			err = os.WriteFile(path, png, 0o644)
		}
		if err != nil {
			t.Logf("browsertest: no screenshot of the failed test's tab: %v", err)
			return
		}
		t.Logf("browsertest: the failed test's tab: %s", path)
	})
}

// Screenshot saves a screenshot of the whole page (beyond the window, as
// tall as the page is) of the tab of ctx as a PNG file at path, creating its
// directory: what a failing browser test leaves behind to look at. The
// quality is 100 because chromedp.FullScreenshot makes a JPEG at any other.
func Screenshot(t testing.TB, ctx context.Context, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browsertest: screenshot: %v", err)
	}
	// path is the test's, or in the folder the developer named (Shot).
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // see above
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil { //nolint:gosec // see above
		t.Fatal(err)
	}
}

// ExpectStatus says that responses of status to the requests whose URL path
// is path are part of the test (a 404 the console shows as "not found", a
// 401 that sends the user to sign in), not errors of the page: Errors leaves
// them out, and the "Failed to load resource" entries of the browser log
// about them too.
func ExpectStatus(ctx context.Context, path string, status int) {
	c := from(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expected = append(c.expected, expectation{path: path, status: int64(status)})
}

// Errors returns what the page of ctx's tab (from New) reported as errors
// so far, one line each, in the order they came. It first makes a round
// trip to the page, so that whatever the page did before the call (a
// console.error in a click handler) is in the list, without a sleep.
func Errors(ctx context.Context) []string {
	c := from(ctx)
	// The page's events reach the collector in order, before the reply to a
	// later command; the round trip's own failure (a page gone) is no error
	// of the page's.
	rtCtx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	chromedp.Call(rtCtx, runtime.Evaluate, runtime.EvaluateParams{Expression: "0"}) //nolint:errcheck // see above
	return c.errors()
}

// RequireNoErrors fails the test when the page of ctx's tab reported any
// error (Errors), listing them.
func RequireNoErrors(t testing.TB, ctx context.Context) {
	t.Helper()
	if errs := Errors(ctx); len(errs) > 0 {
		t.Fatalf("browsertest: the page reported %d error(s):\n  %s", len(errs), strings.Join(errs, "\n  "))
	}
}

// findOrInstall finds Chromium, installing Debian's chromium package when it
// is missing. A lock file keeps racing test processes (go test runs
// packages in parallel) from installing it twice.
func findOrInstall(ctx context.Context) (string, error) {
	look := func() (string, error) {
		if bin, err := exec.LookPath(packageName); err == nil {
			return bin, nil
		}
		return exec.LookPath(binaryPath)
	}
	if bin, err := look(); err == nil {
		return bin, nil
	}
	unlock, err := localsvc.LockFile(ctx, filepath.Join(os.TempDir(), "engagement-browsertest-install.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if bin, err := look(); err == nil {
		return bin, nil // installed by a racing process
	}
	hint := "chromium is not installed; install the chromium package (apt-get install --no-install-recommends chromium, or make test-deps)"
	if err := localsvc.AptInstall(ctx, "browsertest", packageName, hint); err != nil {
		return "", err
	}
	bin, err := look()
	if err != nil {
		return "", errors.New("chromium is not in PATH nor at " + binaryPath + " even after installing the chromium package")
	}
	return bin, nil
}

type collectorKey struct{}

func from(ctx context.Context) *collector {
	c, ok := ctx.Value(collectorKey{}).(*collector)
	if !ok {
		panic("browsertest: the context is not one of New's")
	}
	return c
}

// collector gathers a tab's errors. Its listen runs on chromedp's goroutine
// that reads the tab's messages, so it only records; the judgment (what is
// expected, what repeats another line) waits for errors, when every
// expectation is known whatever the order of the events.
type collector struct {
	mu       sync.Mutex
	problems []problem
	requests map[network.RequestID]*request
	expected []expectation
}

// problem is one error the page reported.
type problem struct {
	text string
	// network is the request that failed or had an error status; logOf the
	// request a browser log entry is about (a "Failed to load resource").
	network, logOf *request
}

// request is one network request of the page.
type request struct {
	method, url string
	own         bool  // to the origin of the document that made it
	status      int64 // of its response, 0 until there is one
	failed      bool  // reported as a problem of its own
}

type expectation struct {
	path   string
	status int64
}

func (c *collector) listen(ev any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		switch ev.Type {
		case runtime.ConsoleAPICalledTypeError:
			c.add(problem{text: "console.error: " + args(ev.Args) + at(ev.StackTrace)})
		case runtime.ConsoleAPICalledTypeAssert:
			c.add(problem{text: "console.assert: Assertion failed: " + args(ev.Args) + at(ev.StackTrace)})
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			// An Error's description is its message and then its stack.
			desc, _, _ := strings.Cut(value(d.Exception), "\n    at ")
			text += " " + desc
		}
		where := at(d.StackTrace)
		if where == "" && d.URL != "" {
			where = fmt.Sprintf(" (%s:%d:%d)", d.URL, d.LineNumber+1, d.ColumnNumber+1)
		}
		c.add(problem{text: "uncaught exception: " + text + where})
	case *log.EventEntryAdded:
		e := ev.Entry
		if e.Level != log.EntryLevelError {
			return
		}
		text := fmt.Sprintf("log error (%s): %s", e.Source, e.Text)
		if e.URL != "" {
			text += " (" + e.URL + ")"
		}
		c.add(problem{text: text, logOf: c.requests[e.NetworkRequestID]})
	case *network.EventRequestWillBeSent:
		// A redirect sends the same request again, to its new URL.
		c.requests[ev.RequestID] = &request{
			method: ev.Request.Method,
			url:    ev.Request.URL,
			own:    sameOrigin(ev.Request.URL, ev.DocumentURL),
		}
	case *network.EventResponseReceived:
		r := c.requests[ev.RequestID]
		if r == nil || ev.Response == nil {
			return
		}
		r.status = ev.Response.Status
		if r.own && r.status >= 400 {
			r.failed = true
			c.add(problem{text: fmt.Sprintf("%s %s: HTTP %d %s", r.method, r.url, r.status, ev.Response.StatusText), network: r})
		}
	case *network.EventLoadingFailed:
		r := c.requests[ev.RequestID]
		// Canceled: the page navigated away or aborted it, on purpose.
		if r == nil || !r.own || ev.Canceled || r.failed {
			return
		}
		r.failed = true
		text := fmt.Sprintf("%s %s: %s", r.method, r.url, ev.ErrorText)
		if ev.BlockedReason != "" {
			text += " (blocked: " + string(ev.BlockedReason) + ")"
		}
		c.add(problem{text: text, network: r})
	}
}

func (c *collector) add(p problem) {
	p.text = strings.ReplaceAll(strings.TrimSpace(p.text), "\n", " | ")
	c.problems = append(c.problems, p)
}

func (c *collector) errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.problems {
		switch {
		case p.network != nil && c.expects(p.network, false):
			continue
		case p.logOf != nil && (p.logOf.failed || c.expects(p.logOf, true)):
			continue // said by the request's own line, or expected
		}
		out = append(out, p.text)
	}
	return out
}

// expects reports whether the test expects r's response. A log entry can
// come before the response it is about; anyPending then takes a request
// without a status yet by its path alone.
func (c *collector) expects(r *request, anyPending bool) bool {
	u, err := url.Parse(r.url)
	if err != nil {
		return false
	}
	for _, e := range c.expected {
		if e.path == u.Path && (e.status == r.status || anyPending && r.status == 0) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether the URLs have the same scheme and host:port.
func sameOrigin(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	return errA == nil && errB == nil && ua.Host != "" && ua.Scheme == ub.Scheme && ua.Host == ub.Host
}

// args renders console call arguments about as the DevTools console does.
func args(objs []*runtime.RemoteObject) string {
	parts := make([]string, len(objs))
	for i, o := range objs {
		parts[i] = value(o)
	}
	return strings.Join(parts, " ")
}

// value renders one JavaScript value: a string as it is, a primitive as its
// value, an object as its description (an Error's message and stack).
func value(o *runtime.RemoteObject) string {
	if o == nil {
		return "null"
	}
	if o.Type == runtime.RemoteObjectTypeString {
		var s string
		if err := json.Unmarshal([]byte(o.Value), &s); err == nil {
			return s
		}
	}
	switch {
	case o.Type == runtime.RemoteObjectTypeUndefined:
		return "undefined"
	case o.Preview != nil && o.Subtype != runtime.RemoteObjectSubtypeError:
		return preview(o.Preview)
	case o.UnserializableValue != "":
		return string(o.UnserializableValue)
	case o.Description != "":
		return o.Description
	case len(o.Value) > 0:
		return string(o.Value)
	}
	return string(o.Type)
}

// preview renders an object's first properties, {code: 7, name: "x"} or
// [1, 2], rather than its bare description "Object".
func preview(p *runtime.ObjectPreview) string {
	var items []string
	for _, prop := range p.Properties {
		v := prop.Value
		if prop.Type == runtime.PropertyPreviewTypeString {
			v = strconv.Quote(v)
		}
		if p.Subtype == runtime.ObjectPreviewSubtypeArray {
			items = append(items, v)
		} else {
			items = append(items, prop.Name+": "+v)
		}
	}
	if p.Overflow {
		items = append(items, "…")
	}
	body := strings.Join(items, ", ")
	switch {
	case p.Subtype == runtime.ObjectPreviewSubtypeArray:
		return "[" + body + "]"
	case p.Description == "Object":
		return "{" + body + "}"
	}
	return p.Description + " {" + body + "}"
}

// at is " (url:line:column)" of a stack's top frame, 1-based, or "".
func at(st *runtime.StackTrace) string {
	if st == nil || len(st.CallFrames) == 0 {
		return ""
	}
	f := st.CallFrames[0]
	return fmt.Sprintf(" (%s:%d:%d)", f.URL, f.LineNumber+1, f.ColumnNumber+1)
}

// tailBuffer keeps the last max bytes written to it, for the browser's
// output in an error message; chromedp writes to it from its own goroutine.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if len(b.b) > b.max {
		b.b = b.b[len(b.b)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.b))
}
