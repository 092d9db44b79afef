package consolecmd_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cli/consolecmd"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// The tests below are issue 41's findings about the console's identity and
// transport, each made with the shipped binary and curl: they run the
// command as the binary does (cmdtest.Start) and talk to it over TCP.

// htpasswdFile writes an htpasswd file holding ops:pw at cost, as
// `htpasswd -nBC cost ops` would, and returns its path.
func htpasswdFile(t *testing.T, cost int) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), cost)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(file, []byte("ops:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// startConsole starts the console with env and args on a free loopback
// port (PORT when all is true: every interface) and waits until it answers
// at base (scheme "http" or "https", with client).
func startConsole(t *testing.T, all bool, env []string, args ...string) (*cmdtest.Running, int) {
	t.Helper()
	port := freePort(t)
	if all {
		env = append(env, "PORT="+fmt.Sprint(port))
	} else {
		args = append(args, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	}
	running := cmdtest.Start(consolecmd.NewCommand, env, append(args, "--log-format", "json")...)
	t.Cleanup(func() { running.Stop() })
	waitUp(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", port), running)
	return running, port
}

// startsOrExits starts the console and reports what became of it: it
// exited (with its result), or it answered on its port (then it is
// stopped, and its result returned with started true).
func startsOrExits(t *testing.T, env []string, port int, args ...string) (cmdtest.Result, bool) {
	t.Helper()
	running := cmdtest.Start(consolecmd.NewCommand, env, args...)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-running.Done():
			return running.Wait(), false
		default:
		}
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
			resp.Body.Close()
			return running.Stop(), true
		}
		time.Sleep(50 * time.Millisecond) // polling a starting server, not timing a test
	}
	t.Fatal("the console neither exited nor answered within a minute")
	return cmdtest.Result{}, false
}

// Issue 41, finding 2: with --trusted-user-header and --htpasswd on every
// interface, `curl -H 'X-Forwarded-Email: ops'` was the operator ops. The
// header without --trusted-proxy off loopback is now a usage error.
func TestConsoleRefusesATrustedHeaderWithoutATrustedProxy(t *testing.T) {
	url := pgtest.NewDatabase(t)
	port := freePort(t)
	env := cmdtest.Env("DATABASE_URL="+url, "PORT="+fmt.Sprint(port), "ENGAGEMENT_CONSOLE_HTPASSWD="+htpasswdFile(t, bcrypt.MinCost),
		"ENGAGEMENT_CONSOLE_OPERATORS=ops")
	res, started := startsOrExits(t, env, port, "--trusted-user-header", "X-Forwarded-Email")
	if started {
		t.Fatalf("the console started on every interface believing X-Forwarded-Email from anyone; want exit 2\n%s", res.Stderr)
	}
	if res.Code != cli.ExitUsage || !strings.Contains(res.Stderr, "--trusted-proxy") {
		t.Fatalf("exit %d %s, want 2 naming --trusted-proxy", res.Code, res.Stderr)
	}
	if n := len(cmdtest.Lines(res.Stderr)); n != 1 {
		t.Errorf("the refusal is %d lines, want one:\n%s", n, res.Stderr)
	}
}

// With --trusted-proxy, the header counts only from those addresses: this
// test's requests come from 127.0.0.1, which is not one of them, so the
// header is refused and Basic auth still applies.
func TestConsoleBelievesTheHeaderOnlyFromTheTrustedProxy(t *testing.T) {
	url := pgtest.NewDatabase(t)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_CONSOLE_HTPASSWD="+htpasswdFile(t, bcrypt.MinCost),
		"ENGAGEMENT_CONSOLE_OPERATORS=ops", "ENGAGEMENT_CONSOLE_TRUSTED_PROXY=192.0.2.0/24, 198.51.100.7")
	_, port := startConsole(t, true, env, "--trusted-user-header", "X-Forwarded-Email")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	req, _ := http.NewRequest(http.MethodGet, base+"/queue", nil)
	req.Header.Set("X-Forwarded-Email", "ops")
	resp, body := roundTrip(t, http.DefaultClient, req)
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "csrf-token") {
		t.Errorf("X-Forwarded-Email: ops from an untrusted address: %d, want 401 and no CSRF token:\n%.300s", resp.StatusCode, body)
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/queue", nil)
	req.SetBasicAuth("ops", "pw")
	if resp, body := roundTrip(t, http.DefaultClient, req); resp.StatusCode != http.StatusOK {
		t.Errorf("Basic auth beside the trusted header: %d %.300s, want 200", resp.StatusCode, body)
	}
}

// On loopback without --trusted-proxy, loopback is the proxy (oauth2-proxy
// on the same host): the header counts from it, once, and never beside
// Basic credentials naming someone else.
func TestConsoleOnLoopbackTrustsTheLocalProxy(t *testing.T) {
	url := pgtest.NewDatabase(t)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_CONSOLE_HTPASSWD="+htpasswdFile(t, bcrypt.MinCost),
		"ENGAGEMENT_CONSOLE_OPERATORS=ana@example.com")
	_, port := startConsole(t, false, env, "--trusted-user-header", "X-Forwarded-Email")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for _, tc := range []struct {
		name   string
		values []string
		basic  string
		code   int
	}{
		{"one value", []string{"ana@example.com"}, "", http.StatusOK},
		{"the header twice", []string{"ana@example.com", "mallory@example.com"}, "", http.StatusBadRequest},
		{"a list", []string{"mallory@example.com, ana@example.com"}, "", http.StatusBadRequest},
		{"Basic credentials of another user", []string{"ana@example.com"}, "ops", http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(http.MethodGet, base+"/queue", nil)
		for _, v := range tc.values {
			req.Header.Add("X-Forwarded-Email", v)
		}
		if tc.basic != "" {
			req.SetBasicAuth(tc.basic, "pw")
		}
		resp, body := roundTrip(t, http.DefaultClient, req)
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %d, want %d: %.300s", tc.name, resp.StatusCode, tc.code, body)
		}
		if tc.code != http.StatusOK && strings.Contains(body, "csrf-token") {
			t.Errorf("%s: the refusal hands out a CSRF token", tc.name)
		}
	}
}

// Issue 41, finding 3: 2,000 wrong passwords went through in 18.5 s and
// none was logged. Now each failure is one log line fail2ban can read (the
// filter in docs/console.md is tested against it), and after a few a
// client is answered 429 with Retry-After, without bcrypt.
func TestConsoleLimitsAndLogsFailedLogins(t *testing.T) {
	url := pgtest.NewDatabase(t)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_CONSOLE_HTPASSWD="+htpasswdFile(t, bcrypt.MinCost))
	running, port := startConsole(t, false, env)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	const tries = 40
	const password = "hunter2-guess"
	codes := map[int]int{}
	retryAfter := ""
	for i := range tries {
		req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
		req.SetBasicAuth("ops", fmt.Sprintf("%s-%d", password, i))
		resp, _ := roundTrip(t, http.DefaultClient, req)
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && retryAfter == "" {
			retryAfter = resp.Header.Get("Retry-After")
		}
	}
	if codes[http.StatusUnauthorized] == 0 || codes[http.StatusUnauthorized] > 20 || codes[http.StatusTooManyRequests] < tries-20 {
		t.Errorf("%d wrong passwords from one client: %v, want a few 401s then 429s", tries, codes)
	}
	if secs, err := strconv.Atoi(retryAfter); err != nil || secs < 1 {
		t.Errorf("429's Retry-After %q, want whole seconds", retryAfter)
	}

	res := running.Stop()
	var failed []string
	for _, line := range cmdtest.Lines(res.Stderr) {
		var l struct {
			Message, User, Client string
		}
		if strings.HasPrefix(line, consolecmd.Name+": open ") {
			continue // the address to open, for the person who started it
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("a log line is not JSON: %s", line)
		}
		if l.Message == "login failed" {
			failed = append(failed, line)
			if l.User != "ops" || l.Client != "127.0.0.1" {
				t.Errorf("login failed line without the user and client: %s", line)
			}
		}
	}
	if len(failed) != codes[http.StatusUnauthorized] {
		t.Errorf("%d login failed lines for %d failed logins:\n%s", len(failed), codes[http.StatusUnauthorized], res.Stderr)
	}
	if strings.Contains(res.Stderr, password) {
		t.Errorf("a password reached the log:\n%s", res.Stderr)
	}
	re := fail2banRegexp(t)
	for _, line := range failed {
		if m := re.FindStringSubmatch(line); m == nil || m[1] != "127.0.0.1" {
			t.Errorf("docs/console.md's fail2ban filter %s does not find 127.0.0.1 in %s", re, line)
		}
	}
	if re.MatchString(`{"level":"info","user":"\",\"client\":\"203.0.113.9","message":"login failed"}`) {
		t.Errorf("the fail2ban filter can be steered by a user name")
	}
}

// fail2banRegexp is docs/console.md's failregex, with fail2ban's <ADDR>
// as a group.
func fail2banRegexp(t *testing.T) *regexp.Regexp {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/console.md")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(doc)))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "failregex = "); ok {
			return regexp.MustCompile(strings.ReplaceAll(rest, "<ADDR>", `([0-9a-fA-F.:]+)`))
		}
	}
	t.Fatal("docs/console.md has no `failregex = ` line")
	return nil
}

func roundTrip(t *testing.T, client *http.Client, req *http.Request) (answer, string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, resp.TLS}, string(body)
}

// answer is what the tests read of a response, its body read and closed.
type answer struct {
	StatusCode int
	Header     http.Header
	TLS        *tls.ConnectionState
}

// Issue 41, finding 5: a malformed bcrypt entry (a truncated paste) was
// accepted at start, and its user was locked out without a word.
func TestConsoleRefusesAMalformedHtpasswdEntry(t *testing.T) {
	url := pgtest.NewDatabase(t)
	good, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "htpasswd")
	content := "ops:" + string(good) + "\n# viewers\nviewer:" + string(good[:40]) + "\n"
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	res, started := startsOrExits(t, cmdtest.Env("DATABASE_URL="+url), port, "--htpasswd", file, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	if started {
		t.Fatalf("the console started with viewer's truncated hash; want exit 2 naming line 3\n%s", res.Stderr)
	}
	if res.Code != cli.ExitUsage || !strings.Contains(res.Stderr, "line 3") || !strings.Contains(res.Stderr, "viewer") {
		t.Errorf("exit %d %s, want 2 naming line 3 and viewer", res.Code, res.Stderr)
	}
	if strings.Contains(res.Stderr, string(good[:40])) {
		t.Errorf("the refusal quotes the hash: %s", res.Stderr)
	}
}

// Issue 41, finding 5: Basic auth over plain HTTP on every interface
// started without a word, and there was no TLS.
func TestConsoleWarnsAboutBasicAuthOverPlainHTTP(t *testing.T) {
	url := pgtest.NewDatabase(t)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_CONSOLE_HTPASSWD="+htpasswdFile(t, bcrypt.MinCost))
	count := func(stderr string) int {
		n := 0
		for _, line := range cmdtest.Lines(stderr) {
			if strings.Contains(line, `"level":"warn"`) && strings.Contains(line, "plain HTTP") {
				n++
			}
		}
		return n
	}
	running, _ := startConsole(t, true, env)
	if res := running.Stop(); count(res.Stderr) != 1 {
		t.Errorf("Basic auth over plain HTTP on every interface: %d warnings, want one:\n%s", count(res.Stderr), res.Stderr)
	}
	running, _ = startConsole(t, false, env)
	if res := running.Stop(); count(res.Stderr) != 0 {
		t.Errorf("on loopback: %d warnings, want none:\n%s", count(res.Stderr), res.Stderr)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(41), Subject: pkix.Name{CommonName: "engagement-console test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, roots
}

func TestConsoleServesHTTPS(t *testing.T) {
	url := pgtest.NewDatabase(t)
	certFile, keyFile, roots := selfSigned(t)
	port := freePort(t)
	env := cmdtest.Env("DATABASE_URL="+url, "PORT="+fmt.Sprint(port), "ENGAGEMENT_CONSOLE_HTPASSWD="+htpasswdFile(t, bcrypt.MinCost),
		"ENGAGEMENT_CONSOLE_TLS_KEY="+keyFile)
	running := cmdtest.Start(consolecmd.NewCommand, env, "--tls-cert", certFile, "--log-format", "json")
	t.Cleanup(func() { running.Stop() })
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-running.Done():
			res := running.Wait()
			t.Fatalf("the console exited %d: %s", res.Code, res.Stderr)
		default:
		}
		resp, err := client.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/healthz: %v", base, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a starting server, not timing a test
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
	req.SetBasicAuth("ops", "pw")
	if resp, body := roundTrip(t, client, req); resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Errorf("GET / over HTTPS as ops: %d %.200s, want 200 over TLS", resp.StatusCode, body)
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP on the HTTPS port answered 200")
		}
	}
	res := running.Stop()
	if strings.Contains(res.Stderr, "plain HTTP") {
		t.Errorf("a console serving HTTPS warns about plain HTTP:\n%s", res.Stderr)
	}
	if !strings.Contains(res.Stderr, "open https://") {
		t.Errorf("the console does not say to open https://:\n%s", res.Stderr)
	}

	// One of the two is a usage error.
	if res := cmdtest.Exec(t, consolecmd.NewCommand, cmdtest.Env("DATABASE_URL="+url), "--tls-cert", certFile); res.Code != cli.ExitUsage ||
		!strings.Contains(res.Stderr, "--tls-key") {
		t.Errorf("--tls-cert alone: exit %d %s, want 2 naming --tls-key", res.Code, res.Stderr)
	}
}

// Issue 41, finding 5: an authenticated client that sends its body slowly
// held its connection forever. The server now closes a request that takes
// longer than --read-timeout to arrive, however it trickles.
func TestConsoleClosesASlowBody(t *testing.T) {
	url := pgtest.NewDatabase(t)
	env := cmdtest.Env("DATABASE_URL="+url, "ENGAGEMENT_CONSOLE_HTPASSWD="+htpasswdFile(t, bcrypt.MinCost), "ENGAGEMENT_CONSOLE_OPERATORS=ops")
	_, port := startConsole(t, false, env, "--read-timeout", "1s")
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /actions/requeue/preview HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic b3BzOnB3\r\n"+
		"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\nstatus=failed")
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the slow client: a byte every 100 ms, for as long as the server takes them
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	// A real socket deadline: far beyond --read-timeout, so reaching it
	// means the server never let go.
	if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server still held the trickling connection after 20 s (--read-timeout 1s)")
	}
}
