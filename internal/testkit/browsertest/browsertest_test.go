package browsertest_test

import (
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/engagement-scheduler/engagement/internal/testkit/browsertest"
)

// pages are the tiny site the tests browse; any other path is a 404.
var pages = map[string]string{
	"/clean": `<!doctype html><title>clean</title>
<link rel="icon" href="data:,">
<h1>All is well</h1>
<script>console.log("a log line is no error"); console.warn("nor is a warning");</script>`,
	"/button": `<!doctype html><title>button</title>
<link rel="icon" href="data:,">
<button id="boom" onclick="console.error('clicked into trouble', 42, {code: 7, name: 'x'})">Boom</button>`,
	"/throws": `<!doctype html><title>throws</title>
<link rel="icon" href="data:,">
<script>throw new Error("thrown by the page's script");</script>`,
	"/fetches": `<!doctype html><title>fetches</title>
<link rel="icon" href="data:,">
<p id="status">fetching</p>
<script>fetch("/missing").then(r => { document.getElementById("status").textContent = "got " + r.status; });</script>`,
	"/form": `<!doctype html><title>form</title>
<link rel="icon" href="data:,">
<form method="post" action="/submitted"><button id="send" type="submit">Send</button></form>`,
	// The answer to the form, as the console's are: its deferred script
	// (served slowly, as on a busy machine) holds DOMContentLoaded back.
	"/submitted": `<!doctype html><title>submitted</title>
<link rel="icon" href="data:,">
<script src="/slow.js" defer></script>
<p id="done">Done</p>`,
	"/slow.js": `"use strict";`,
}

// slowly is how long the server takes to answer /slow.js.
const slowly = time.Second

func serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if strings.HasSuffix(r.URL.Path, ".js") {
			w.Header().Set("Content-Type", "text/javascript")
			select {
			case <-time.After(slowly):
			case <-r.Context().Done():
			}
		}
		w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestCleanPageHasNoErrors: a page that logs and warns, but reports no
// error, passes RequireNoErrors.
func TestCleanPageHasNoErrors(t *testing.T) {
	base := serve(t)
	ctx := browsertest.New(t)
	browsertest.Run(t, ctx, chromedp.Navigate(base+"/clean"), chromedp.WaitVisible(chromedp.CSS("h1")))
	browsertest.RequireNoErrors(t, ctx)
}

// A page a click loads is whole when Run returns, its deferred scripts
// run: Chromium pushes a new document to the DevTools client at
// DOMContentLoaded, which invalidates every node id found before it, so a
// query between WaitVisible and then failed "No node with given id found"
// (the console's TestEraseInTheBrowser, on a busy machine).
func TestRunReturnsWhenThePageIsLoaded(t *testing.T) {
	base := serve(t)
	ctx := browsertest.New(t)
	browsertest.Run(t, ctx, chromedp.Navigate(base+"/form"))
	browsertest.Run(t, ctx, chromedp.Click(chromedp.ID("send")), chromedp.WaitVisible(chromedp.ID("done")))
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.readyState"))
	if err != nil {
		t.Fatal(err)
	}
	if state != "complete" {
		t.Errorf("when Run returned the page was %q, want complete", state)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("done")))
	if err != nil || text != "Done" {
		t.Errorf("the page says %q (%v), want Done", text, err)
	}
	browsertest.RequireNoErrors(t, ctx)
}

// TestConsoleErrorOnClick: the console.error of a click handler is
// collected right after the click, and is the only error.
func TestConsoleErrorOnClick(t *testing.T) {
	base := serve(t)
	ctx := browsertest.New(t)
	browsertest.Run(t, ctx, chromedp.Navigate(base+"/button"))
	if errs := browsertest.Errors(ctx); len(errs) != 0 {
		t.Fatalf("before the click: %q, want no errors", errs)
	}
	browsertest.Run(t, ctx, chromedp.Click(chromedp.ID("boom")))
	errs := browsertest.Errors(ctx)
	if len(errs) != 1 || !strings.HasPrefix(errs[0], `console.error: clicked into trouble 42 {code: 7, name: "x"} (`) {
		t.Fatalf("after the click: %q, want exactly the console.error", errs)
	}
}

// TestUncaughtException: an exception no script catches is reported.
func TestUncaughtException(t *testing.T) {
	base := serve(t)
	ctx := browsertest.New(t)
	browsertest.Run(t, ctx, chromedp.Navigate(base+"/throws"))
	errs := browsertest.Errors(ctx)
	if len(errs) != 1 || !strings.Contains(errs[0], "uncaught exception: Uncaught Error: thrown by the page's script") {
		t.Fatalf("errors: %q, want the uncaught exception", errs)
	}
}

// TestFailedRequest: a request to the page's own origin answered 404 is an
// error (one line, not also the browser log's "Failed to load resource"),
// unless the test expects it.
func TestFailedRequest(t *testing.T) {
	base := serve(t)
	for _, expect := range []bool{false, true} {
		ctx := browsertest.New(t)
		if expect {
			browsertest.ExpectStatus(ctx, "/missing", http.StatusNotFound)
		}
		browsertest.Run(t, ctx, chromedp.Navigate(base+"/fetches"),
			chromedp.WaitVisible(chromedp.Search(`//p[@id="status"][text()="got 404"]`)))
		errs := browsertest.Errors(ctx)
		switch {
		case expect && len(errs) != 0:
			t.Errorf("expecting the 404: %q, want no errors", errs)
		case !expect && (len(errs) != 1 || !strings.Contains(errs[0], base+"/missing: HTTP 404")):
			t.Errorf("errors: %q, want the 404 of /missing, once", errs)
		}
	}
}

// TestScreenshot: Screenshot writes a PNG of the page, creating the
// directory.
func TestScreenshot(t *testing.T) {
	base := serve(t)
	ctx := browsertest.New(t)
	browsertest.Run(t, ctx, chromedp.Navigate(base+"/clean"))
	path := filepath.Join(t.TempDir(), "shots", "clean.png")
	browsertest.Screenshot(t, ctx, path)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() <= 0 || b.Dy() <= 0 {
		t.Fatalf("the screenshot is %v", b)
	}
}

// Shot takes a screenshot only when CONSOLE_SCREENSHOTS names a folder:
// nobody looks at one in a temporary folder.
func TestShotOnlyWhenAsked(t *testing.T) {
	base := serve(t)
	ctx := browsertest.New(t)
	browsertest.Run(t, ctx, chromedp.Navigate(base+"/clean"))
	dir := t.TempDir()
	t.Setenv(browsertest.ScreenshotsEnv, "")
	browsertest.Shot(t, ctx, "unasked.png")
	t.Setenv(browsertest.ScreenshotsEnv, dir)
	browsertest.Shot(t, ctx, "asked.png")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "asked.png" {
		t.Errorf("the folder holds %v, want asked.png alone", entries)
	}
}

// A browser test that fails keeps a screenshot of its tab, and says where.
// The failing test runs in a test binary of its own (this one, again).
func TestAFailedTestKeepsItsTab(t *testing.T) {
	if os.Getenv("BROWSERTEST_FAIL") != "" {
		ctx := browsertest.New(t)
		browsertest.Run(t, ctx, chromedp.Navigate(os.Getenv("BROWSERTEST_FAIL")+"/clean"))
		t.Fatal("failing on purpose")
	}
	// A short TMPDIR: the browser's profile is made in it, and Chromium
	// refuses a socket path over 107 bytes (t.TempDir's is longer).
	tmp, err := os.MkdirTemp("", "bt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	cmd := exec.Command(os.Args[0], "-test.run=^TestAFailedTestKeepsItsTab$", "-test.v") //nolint:gosec // this test binary itself
	cmd.Env = append(os.Environ(), "BROWSERTEST_FAIL="+serve(t), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the failing test passed:\n%s", out)
	}
	path := filepath.Join(tmp, "browsertest-failures", "TestAFailedTestKeepsItsTab.png")
	if !strings.Contains(string(out), "the failed test's tab: "+path) {
		t.Errorf("the failing test does not say where its screenshot is:\n%s", out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("the kept screenshot is no PNG: %v", err)
	}
}
