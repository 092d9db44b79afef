package ctl_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/cli/ctl"
	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

const receiverSecret = "check-receiver-test-secret"

// signedReceiver is a real HTTP receiver that checks the signature the
// way docs/receiver.md says (401 for a wrong one) and answers every
// signed request with answer, which is told whether the request's
// Idempotency-Key was seen before.
func signedReceiver(t *testing.T, answer func(w http.ResponseWriter, repeat bool)) string {
	t.Helper()
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || !transport.VerifySignature(receiverSecret, body, r.Header.Get("X-Engagement-Signature")) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		repeat := seen[key]
		seen[key] = true
		mu.Unlock()
		answer(w, repeat)
	}))
	t.Cleanup(s.Close)
	return s.URL
}

type receiverReport struct {
	SignatureChecked bool     `json:"signature_checked"`
	Answered         bool     `json:"answered"`
	TakenAsNew       *bool    `json:"taken_as_new"`
	RepeatDropped    bool     `json:"repeat_dropped"`
	OK               bool     `json:"ok"`
	Statuses         []int    `json:"statuses"`
	Problems         []string `json:"problems"`
	Error            string   `json:"error"`
}

func checkReceiver(t *testing.T, url string, args ...string) (cmdtest.Result, receiverReport) {
	t.Helper()
	res := cmdtest.Exec(t, ctl.NewCommand, nil, append([]string{"check-receiver", "--webhook-url", url, "--webhook-secret", receiverSecret}, args...)...)
	var rep receiverReport
	if strings.Contains(strings.Join(args, " "), "json") {
		lines := cmdtest.Lines(res.Stdout)
		if len(lines) != 1 {
			t.Fatalf("stdout %q: want one JSON line", res.Stdout)
		}
		if err := json.Unmarshal([]byte(lines[0]), &rep); err != nil {
			t.Fatalf("report %q: %v", res.Stdout, err)
		}
	}
	return res, rep
}

// Issue 31, item 6: a bot that answers every signed request, the first
// one for a fresh key included, with Idempotent-Replayed: true (or
// {"duplicate":true}) would have queue-process mark every message sent
// while it sends nothing. check-receiver fails it (exit 4), and says why.
func TestCheckReceiverFailsABotThatCallsAFreshKeyARepeat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, repeat bool)
	}{
		{"Idempotent-Replayed: true", func(w http.ResponseWriter, _ bool) {
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusOK)
		}},
		{`{"duplicate":true}`, func(w http.ResponseWriter, _ bool) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"duplicate":true}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := signedReceiver(t, tc.answer)

			res, rep := checkReceiver(t, url, "--output", "json")
			if res.Code != 4 || rep.OK {
				t.Fatalf("check-receiver --output json: exit %d, %+v, stderr %q; want exit 4, not ok", res.Code, rep, res.Stderr)
			}
			if rep.TakenAsNew == nil || *rep.TakenAsNew {
				t.Errorf("taken_as_new = %v, want false: the first delivery of a fresh key was called a repeat", rep.TakenAsNew)
			}
			if !rep.SignatureChecked || !rep.Answered || !rep.RepeatDropped {
				t.Errorf("report %+v: want the other checks to hold (only the first answer is wrong)", rep)
			}
			if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "fresh key") || !strings.Contains(rep.Problems[0], "repeat") {
				t.Errorf("problems %q, want one saying the first delivery of a fresh key was called a repeat", rep.Problems)
			}

			res, _ = checkReceiver(t, url)
			t.Logf("check-receiver says: %s", res.Stdout)
			lines := cmdtest.Lines(res.Stdout)
			if res.Code != 4 || len(lines) != 1 || !strings.Contains(lines[0], "FAILED") ||
				!strings.Contains(lines[0], "taken as new: NO") || !strings.Contains(lines[0], "fresh key") {
				t.Errorf("check-receiver: exit %d, stdout %q; want exit 4 and one FAILED line saying the fresh key was called a repeat", res.Code, res.Stdout)
			}
			if strings.Contains(res.Stdout+res.Stderr, receiverSecret) {
				t.Error("the secret reached the output")
			}
		})
	}
}

// A receiver that keeps the contract still passes: 401 for the wrong
// signature, 200 for the first signed request, 200 with
// Idempotent-Replayed: true for the repeat.
func TestCheckReceiverPassesABotThatKeepsTheContract(t *testing.T) {
	t.Parallel()
	url := signedReceiver(t, func(w http.ResponseWriter, repeat bool) {
		if repeat {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"message_id":"wamid.probe"}`)
	})
	res, rep := checkReceiver(t, url, "--output", "json")
	if res.Code != 0 || !rep.OK || !rep.SignatureChecked || !rep.Answered || rep.TakenAsNew == nil || !*rep.TakenAsNew || !rep.RepeatDropped || len(rep.Problems) != 0 {
		t.Fatalf("check-receiver: exit %d, %+v, stderr %q; want exit 0 and every check true", res.Code, rep, res.Stderr)
	}
	res, _ = checkReceiver(t, url)
	if res.Code != 0 || !strings.Contains(res.Stdout, ": ok (") || !strings.Contains(res.Stdout, "taken as new: yes") {
		t.Errorf("check-receiver: exit %d, stdout %q; want exit 0 and an ok line", res.Code, res.Stdout)
	}
}

// Every failed check says why in the report, not only which.
func TestCheckReceiverSaysWhyEachCheckFailed(t *testing.T) {
	t.Parallel()
	resends := signedReceiver(t, func(w http.ResponseWriter, _ bool) { w.WriteHeader(http.StatusOK) })
	res, rep := checkReceiver(t, resends, "--output", "json")
	if res.Code != 4 || rep.RepeatDropped || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "same Idempotency-Key") {
		t.Errorf("a bot that sends the repeat: exit %d, %+v; want exit 4 and one problem about the repeat", res.Code, rep)
	}

	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(s.Close)
	res, rep = checkReceiver(t, s.URL, "--output", "json")
	if res.Code != 4 || rep.SignatureChecked || rep.Answered || len(rep.Problems) < 2 || !strings.Contains(strings.Join(rep.Problems, "\n"), "503") {
		t.Errorf("a bot answering 503: exit %d, %+v; want exit 4 and problems naming the 503", res.Code, rep)
	}
}
