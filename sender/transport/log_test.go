package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

func TestLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := transport.NewLog(&buf)
	d := delivery()

	res, err := l.Send(context.Background(), d)
	if err != nil {
		t.Fatalf("Send: got error %v, want nil", err)
	}
	if want := "log-" + d.ID; res.ProviderMessageID != want {
		t.Errorf("ProviderMessageID: got %q, want %q", res.ProviderMessageID, want)
	}
	if l.Name() != "log" || !l.Deduplicates() {
		t.Errorf("Name, Deduplicates: got %q, %v, want \"log\", true", l.Name(), l.Deduplicates())
	}
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("output %q: want exactly one line", out)
	}
	for _, secret := range []string{testJID, testPhone, testText, "Faz um tempinho", "Maria"} {
		if strings.Contains(out, secret) {
			t.Errorf("output %q contains %q", out, secret)
		}
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q is not JSON: %v", out, err)
	}
	// A log line like the binary's (issue 42: the lines had no level).
	if _, err := time.Parse(time.RFC3339, fmt.Sprint(got["time"])); err != nil {
		t.Errorf("line's time %v: %v", got["time"], err)
	}
	delete(got, "time")
	want := map[string]any{
		"level":        "info",
		"message":      transport.LogMessage,
		"transport":    "log",
		"id":           d.ID,
		"user_id":      d.UserID,
		"message_type": d.Type,
		"message_key":  d.Key,
		"destination":  d.Destination,
		"locale":       d.Locale,
		"attempt":      float64(d.Attempt),
		"text_chars":   float64(len(d.Text)),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("line:\n got %v\nwant %v", got, want)
	}
}

func TestLogNilWriter(t *testing.T) {
	t.Parallel()
	if _, err := transport.NewLog(nil).Send(context.Background(), delivery()); err != nil {
		t.Errorf("Send with a nil writer: got error %v, want nil", err)
	}
}
