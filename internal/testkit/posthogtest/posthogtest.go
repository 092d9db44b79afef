// Package posthogtest is a local stand-in for PostHog's capture API, for
// tests: an httptest server on loopback that decodes what the official Go
// client (github.com/posthog/posthog-go) posts to /batch/ and keeps it, or
// that hangs or fails on purpose.
package posthogtest

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Mode is how the server answers a batch.
type Mode int

// Modes.
const (
	Accept Mode = iota // 200, the batch is kept
	Hang               // never answers (until the test ends or the client gives up)
	Fail               // 503, the batch is not kept
)

// Event is one captured event as the client sent it.
type Event struct {
	Type       string         `json:"type"`
	UUID       string         `json:"uuid"`
	Event      string         `json:"event"`
	DistinctID string         `json:"distinct_id"`
	Timestamp  time.Time      `json:"timestamp"`
	Properties map[string]any `json:"properties"`
}

// Batch is one request to /batch/.
type Batch struct {
	APIKey string  `json:"api_key"`
	Events []Event `json:"batch"`
	Raw    string  `json:"-"` // the decoded body, to search for what must not be there
}

// Server is a fake PostHog.
type Server struct {
	URL string

	mu       sync.Mutex
	mode     Mode
	failures int // Fail for this many requests, then Accept
	requests int
	batches  []Batch
	bad      []string
}

// NewServer starts a server that accepts every batch; it stops when the
// test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{}
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, release)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) }) // runs first: frees hanging handlers
	s.URL = hs.URL
	return s
}

// SetMode changes how the server answers from now on.
func (s *Server) SetMode(m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = m
}

// FailFirst makes the next n requests fail with 503, then accepts again.
func (s *Server) FailFirst(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = n
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, release chan struct{}) {
	s.mu.Lock()
	s.requests++
	mode := s.mode
	if s.failures > 0 {
		s.failures--
		mode = Fail
	}
	s.mu.Unlock()

	if r.Method != http.MethodPost || r.URL.Path != "/batch/" {
		s.reject("unexpected request " + r.Method + " " + r.URL.Path)
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			s.reject("bad gzip body: " + err.Error())
			http.Error(w, "bad gzip", http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		s.reject("read body: " + err.Error())
		return
	}
	switch mode {
	case Hang:
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return
	case Fail:
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	var b Batch
	if err := json.Unmarshal(raw, &b); err != nil {
		s.reject("undecodable batch: " + err.Error())
		http.Error(w, "bad batch", http.StatusBadRequest)
		return
	}
	b.Raw = string(raw)
	s.mu.Lock()
	s.batches = append(s.batches, b)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status":1}`)
}

func (s *Server) reject(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bad = append(s.bad, why)
}

// Requests counts every request the server got, answered or not.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Batches returns the batches accepted so far.
func (s *Server) Batches() []Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Batch(nil), s.batches...)
}

// Events returns every accepted event, in arrival order.
func (s *Server) Events() []Event {
	var out []Event
	for _, b := range s.Batches() {
		out = append(out, b.Events...)
	}
	return out
}

// Problems lists requests the server could not make sense of: anything
// other than a decodable POST to /batch/.
func (s *Server) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
}
