package main_test

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
)

// TestSIGTERMFromTheFirstInstantExitsZeroWithASummary (issue 55, finding
// 5): a SIGTERM in queue-process's first ~25 ms killed it (exit 143, no
// summary: 10 of 10 at 0 ms). The runtime knew no handler until package
// earlystop's init, which Go runs after os, os/signal and what they import.
// Ten rounds send SIGTERM from the program's first instant
// (cmdtest.Terminate: before any package of the module has started) to
// 25 ms after it, while the database (a listener that never answers) is
// not open yet: each exits 0 with one JSON summary saying it stopped for a
// shutdown, nothing delivered.
func TestSIGTERMFromTheFirstInstantExitsZeroWithASummary(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn // open, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	bin := cmdtest.Build(t, "./cmd/queue-process")
	url := "postgres://nobody@" + ln.Addr().String() + "/x?sslmode=disable&connect_timeout=120"
	env := cmdtest.Env("DATABASE_URL=" + url)
	delays := []time.Duration{0, 0, 0, 0, 0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond}
	for _, delay := range delays {
		what := "SIGTERM " + delay.String() + " after the first instant"
		res := cmdtest.Terminate(t, bin, env, delay, "--transport", "log", "--output", "json")
		if res.Code != 0 {
			t.Errorf("%s: exit %d, want 0\nstdout: %s\nstderr: %s", what, res.Code, res.Stdout, res.Stderr)
			continue
		}
		var sum struct {
			Job, Transport, Stopped string
			Sent                    int
		}
		dec := json.NewDecoder(strings.NewReader(res.Stdout))
		if err := dec.Decode(&sum); err != nil {
			t.Errorf("%s: stdout %q is not a JSON summary: %v", what, res.Stdout, err)
			continue
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Errorf("%s: stdout %q holds more than one JSON object", what, res.Stdout)
		}
		if sum.Job != "queue-process" || sum.Transport != "log" || sum.Stopped != "shutdown" || sum.Sent != 0 {
			t.Errorf("%s: summary %+v, want queue-process via log, stopped for a shutdown, nothing sent", what, sum)
		}
	}
}
