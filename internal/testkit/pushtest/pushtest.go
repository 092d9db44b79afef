// Package pushtest gives tests a Prometheus Pushgateway of their own.
//
// New starts a real prometheus-pushgateway (the Debian package's binary,
// found in PATH or at /usr/bin/prometheus-pushgateway, installed with
// apt-get through localsvc when missing) on a free loopback port, without
// persistence, and stops it in t.Cleanup. Each test gets a fresh, empty
// gateway. Only when the binary cannot be installed or started, or when
// PUSHTEST_EMULATE=1, does New fall back to an in-process emulation of the
// Pushgateway's HTTP API (PUT, POST and DELETE on
// /metrics/job/<job>{/<label>/<value>}, GET /metrics); the test log says
// which one ran, and Gateway.Real tells the test.
package pushtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/engagement-scheduler/engagement/internal/testkit/localsvc"
	"github.com/engagement-scheduler/engagement/internal/testkit/syncbuf"
)

const (
	binaryName = "prometheus-pushgateway"
	// setupTimeout bounds finding the binary, which may include apt-get.
	setupTimeout = 10 * time.Minute
)

// Gateway is one test's Pushgateway.
type Gateway struct {
	URL  string // http://127.0.0.1:port, no trailing slash
	Real bool   // a prometheus-pushgateway process, not the emulation
}

var binary = localsvc.Resolver{Timeout: setupTimeout, Find: findOrInstall}

// New returns a fresh, empty Pushgateway for t, stopped in t.Cleanup.
func New(t testing.TB) *Gateway {
	t.Helper()
	if os.Getenv("PUSHTEST_EMULATE") == "1" {
		t.Log("pushtest: PUSHTEST_EMULATE=1: using the emulated Pushgateway HTTP API")
		return emulate(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	bin, err := binary.URL(ctx)
	if err == nil {
		var g *Gateway
		if g, err = start(t, bin); err == nil {
			t.Logf("pushtest: started the real %s at %s", bin, g.URL)
			return g
		}
	}
	t.Logf("pushtest: no real Pushgateway (%v); using the emulated Pushgateway HTTP API", err)
	return emulate(t)
}

// findOrInstall finds the Pushgateway binary, installing the Debian package
// when it is missing (its system service left stopped and disabled). A lock
// file keeps racing test processes from installing it twice.
func findOrInstall(ctx context.Context) (string, error) {
	look := func() (string, error) {
		if bin, err := exec.LookPath(binaryName); err == nil {
			return bin, nil
		}
		return exec.LookPath("/usr/bin/" + binaryName)
	}
	if bin, err := look(); err == nil {
		return bin, nil
	}
	unlock, err := localsvc.LockFile(ctx, filepath.Join(os.TempDir(), "engagement-pushtest-install.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if bin, err := look(); err == nil {
		return bin, nil // installed by a racing process
	}
	hint := binaryName + " is not installed; install the " + binaryName + " package (apt-get install --no-install-recommends " + binaryName + ")"
	if err := localsvc.AptInstall(ctx, "pushtest", binaryName, hint, binaryName); err != nil {
		return "", err
	}
	return look()
}

// start runs bin on a free loopback port until t ends. A port taken between
// choosing and binding it is retried with another.
func start(t testing.TB, bin string) (*Gateway, error) {
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		var out syncbuf.Buffer
		// Debian's build persists to /var/lib/prometheus by default; an
		// empty --persistence.file keeps each test's gateway in memory only.
		cmd := exec.Command(bin, "--web.listen-address="+addr, "--persistence.file=", "--log.level=warn")
		cmd.Stdout, cmd.Stderr = &out, &out
		// The gateway dies with the test process, however that ends.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		url := "http://" + addr
		if err = waitReady(url, exited); err == nil {
			t.Cleanup(stop)
			return &Gateway{URL: url, Real: true}, nil
		}
		stop()
		lastErr = fmt.Errorf("%s on %s: %w\n%s", bin, addr, err, strings.TrimSpace(out.String()))
	}
	return nil, lastErr
}

// waitReady polls the gateway's readiness endpoint until it answers 200,
// the process exits, or 15 s pass.
func waitReady(url string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := client.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/-/ready: %s", resp.Status)
		}
		select {
		case <-exited:
			return errors.New("exited before it was ready")
		case <-time.After(50 * time.Millisecond): // polling for readiness
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after 15 s: %w", err)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Sample is one metric sample the gateway exposes: its name, labels (the
// group's job and grouping labels included) and value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples are what GET /metrics returned.
type Samples []Sample

// Metrics reads the gateway's /metrics and returns the samples of the
// metrics whose names start with prefix (the gateway's own go_*, process_*
// and pushgateway_* metrics are left out unless asked for). Failures are
// fatal.
func (g *Gateway) Metrics(t testing.TB, prefix string) Samples {
	t.Helper()
	resp, err := http.Get(g.URL + "/metrics")
	if err != nil {
		t.Fatalf("pushtest: GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("pushtest: GET /metrics: %s %v\n%s", resp.Status, err, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("pushtest: parse /metrics: %v\n%s", err, body)
	}
	var out Samples
	for name, mf := range families {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range mf.GetMetric() {
			s := Sample{Name: name, Labels: map[string]string{}, Value: value(m)}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Sample) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// Find returns the samples named name whose labels include every
// name=value pair of labels ("" matches an empty or absent label).
func (s Samples) Find(name string, labels ...string) Samples {
	var out Samples
	for _, sample := range s {
		if sample.Name != name {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if sample.Labels[labels[i]] != labels[i+1] {
				match = false
				break
			}
		}
		if match {
			out = append(out, sample)
		}
	}
	return out
}

// Value returns the value of the one sample Find selects; ok is false when
// none or several match.
func (s Samples) Value(name string, labels ...string) (v float64, ok bool) {
	found := s.Find(name, labels...)
	if len(found) != 1 {
		return 0, false
	}
	return found[0].Value, true
}

// String renders a sample like the text format does, labels sorted.
func (s Sample) String() string {
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, s.Labels[k])
	}
	b.WriteString("} ")
	b.WriteString(strconv.FormatFloat(s.Value, 'g', -1, 64))
	return b.String()
}

// String renders the samples one per line, for failure messages.
func (s Samples) String() string {
	lines := make([]string, len(s))
	for i, sample := range s {
		lines[i] = sample.String()
	}
	return strings.Join(lines, "\n")
}
