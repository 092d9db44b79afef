package pushtest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// emulation is the Pushgateway's HTTP API as the real one (1.x) behaves for
// what the project pushes: groups keyed by their grouping labels; PUT
// replaces a group's metrics, POST replaces only the metric families it
// carries, DELETE removes the group; GET /metrics exposes every group's
// metrics with the grouping labels (and an empty instance label) added, and
// push_time_seconds per group. A pushed metric carrying a grouping label is
// refused (400), as the real gateway refuses it.
type emulation struct {
	mu     sync.Mutex
	groups map[string]*group // key: the grouping labels, sorted
}

type group struct {
	labels   map[string]string
	families map[string]*dto.MetricFamily
	pushed   time.Time
}

func emulate(t testing.TB) *Gateway {
	e := &emulation{groups: map[string]*group{}}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &Gateway{URL: srv.URL}
}

func (e *emulation) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/metrics" && r.Method == http.MethodGet:
		e.expose(w)
	case r.URL.Path == "/-/ready" || r.URL.Path == "/-/healthy":
		w.WriteHeader(http.StatusOK)
	case strings.HasPrefix(r.URL.Path, "/metrics/"):
		labels, err := groupingLabels(r.URL.EscapedPath())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch r.Method {
		case http.MethodPut, http.MethodPost:
			err = e.push(r, labels, r.Method == http.MethodPut)
		case http.MethodDelete:
			e.mu.Lock()
			delete(e.groups, groupKey(labels))
			e.mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
			return
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	default:
		http.NotFound(w, r)
	}
}

// groupingLabels parses /metrics/job/<job>{/<label>/<value>}, where a
// label name ending in @base64 marks a base64url value ("=" is empty).
func groupingLabels(escaped string) (map[string]string, error) {
	parts := strings.Split(strings.TrimPrefix(escaped, "/metrics/"), "/")
	if len(parts) < 2 || len(parts)%2 != 0 || strings.TrimSuffix(parts[0], "@base64") != "job" {
		return nil, fmt.Errorf("path %s is not /metrics/job/<job>{/<label>/<value>}", escaped)
	}
	labels := map[string]string{}
	for i := 0; i < len(parts); i += 2 {
		name, raw := parts[i], parts[i+1]
		var value string
		if n, ok := strings.CutSuffix(name, "@base64"); ok {
			name = n
			b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(raw, "="))
			if err != nil {
				return nil, fmt.Errorf("label %s: bad base64 value: %w", name, err)
			}
			value = string(b)
		} else {
			var err error
			if value, err = url.PathUnescape(raw); err != nil {
				return nil, err
			}
		}
		if name == "job" && value == "" {
			return nil, errors.New("job name is required")
		}
		labels[name] = value
	}
	return labels, nil
}

func (e *emulation) push(r *http.Request, labels map[string]string, replace bool) error {
	dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
	pushed := map[string]*dto.MetricFamily{}
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("decode the pushed metrics: %w", err)
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if _, ok := labels[l.GetName()]; ok {
					return fmt.Errorf("pushed metric %s already contains grouping label %s", mf.GetName(), l.GetName())
				}
			}
		}
		pushed[mf.GetName()] = mf
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	key := groupKey(labels)
	g := e.groups[key]
	if g == nil || replace {
		g = &group{labels: labels, families: map[string]*dto.MetricFamily{}}
		e.groups[key] = g
	}
	maps.Copy(g.families, pushed)
	g.pushed = time.Now()
	return nil
}

// expose writes every group's metrics in the text format, the grouping
// labels added to each, families merged by name.
func (e *emulation) expose(w http.ResponseWriter) {
	e.mu.Lock()
	merged := map[string]*dto.MetricFamily{}
	add := func(g *group, mf *dto.MetricFamily) {
		out := merged[mf.GetName()]
		if out == nil {
			out = &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type}
			merged[mf.GetName()] = out
		}
		for _, m := range mf.GetMetric() {
			m = proto.Clone(m).(*dto.Metric)
			extra := maps.Clone(g.labels)
			if _, ok := extra["instance"]; !ok {
				extra["instance"] = ""
			}
			for _, name := range slices.Sorted(maps.Keys(extra)) {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(name), Value: proto.String(extra[name])})
			}
			slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
			out.Metric = append(out.Metric, m)
		}
	}
	gauge := dto.MetricType_GAUGE
	for _, key := range slices.Sorted(maps.Keys(e.groups)) {
		g := e.groups[key]
		for _, name := range slices.Sorted(maps.Keys(g.families)) {
			add(g, g.families[name])
		}
		add(g, &dto.MetricFamily{Name: proto.String("push_time_seconds"), Help: proto.String("Last Unix time when changing this group in the Pushgateway succeeded."),
			Type: &gauge, Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: proto.Float64(float64(g.pushed.UnixNano()) / 1e9)}}}})
	}
	e.mu.Unlock()

	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	w.Header().Set("Content-Type", string(format))
	enc := expfmt.NewEncoder(w, format)
	for _, name := range slices.Sorted(maps.Keys(merged)) {
		if err := enc.Encode(merged[name]); err != nil {
			return
		}
	}
}

func groupKey(labels map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&b, "%s\xff%s\xff", k, labels[k])
	}
	return b.String()
}
