package cli

import (
	"io"
	"os"
	"strings"
	"time"
)

// Env is what a run reads and writes besides its arguments: environment
// variables and the standard streams. Run passes the process's (ProcessEnv);
// tests pass their own to Main and run a command in process, as a cron
// platform would run the binary.
type Env struct {
	// LookupEnv reads an environment variable, like os.LookupEnv. Nil: no
	// variable is set.
	LookupEnv func(name string) (string, bool)
	// Stdout carries the summary only; Stderr the logs and the error line.
	// Nil: io.Discard.
	Stdout, Stderr io.Writer
	// ConnectTimeout, when positive, replaces postgres.DefaultConnectTimeout
	// for database URLs that set no connect_timeout (tests use a short one).
	ConnectTimeout time.Duration
}

// ProcessEnv is the process's environment, stdout and stderr.
func ProcessEnv() Env {
	return Env{LookupEnv: os.LookupEnv, Stdout: os.Stdout, Stderr: os.Stderr}
}

// MapEnv returns a LookupEnv that reads vars (NAME=value entries, as in
// os.Environ; a later entry wins) and nothing else.
func MapEnv(vars []string) func(string) (string, bool) {
	m := make(map[string]string, len(vars))
	for _, kv := range vars {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func (e Env) withDefaults() Env {
	if e.LookupEnv == nil {
		e.LookupEnv = func(string) (string, bool) { return "", false }
	}
	if e.Stdout == nil {
		e.Stdout = io.Discard
	}
	if e.Stderr == nil {
		e.Stderr = io.Discard
	}
	return e
}
