package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("move batch: %w", &pgconn.PgError{Code: code}) }
	tests := []struct {
		name                    string
		err                     error
		connection, independent bool
	}{
		{"raised by a trigger", pg("P0001"), false, false},
		{"check constraint", pg("23514"), false, false},
		{"statement timeout", pg("57014"), false, false},
		{"admin shutdown", pg("57P01"), true, true},
		{"connection failure", pg("08006"), true, true},
		{"syntax error", pg("42601"), false, true},
		{"permission denied", pg("42501"), false, true},
		{"network", errors.New("dial tcp: connection refused"), true, true},
		{"cancelled", context.Canceled, true, true},
	}
	for _, tt := range tests {
		if got := postgres.IsConnectionError(tt.err); got != tt.connection {
			t.Errorf("%s: IsConnectionError = %v, want %v", tt.name, got, tt.connection)
		}
		if got := postgres.IsRowIndependent(tt.err); got != tt.independent {
			t.Errorf("%s: IsRowIndependent = %v, want %v", tt.name, got, tt.independent)
		}
	}
}

func TestRedactRemovesThePasswordAndNewlines(t *testing.T) {
	t.Parallel()
	url := "postgres://scheduler:pa%40ss-w0rd@db.internal:5432/engagement"
	err := postgres.Redact(errors.New("connect as scheduler:pa@ss-w0rd\nfailed: "+url+" and password=pa@ss-w0rd"), url)
	if strings.Contains(err.Error(), "pa@ss-w0rd") || strings.Contains(err.Error(), "pa%40ss-w0rd") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Redact = %q, want no password and one line", err)
	}
	// Issue 24: with the password "a", masking every "a" turned "invalid
	// database URL" into "invxxxxxlid dxxxxxtxxxxxbxxxxxse URL".
	short := "postgres://jobs:a@db.internal/engagement"
	err = postgres.Redact(errors.New("invalid database URL: cannot parse `postgres://jobs:a@db.internal/engagement`"), short)
	if want := "invalid database URL: cannot parse `postgres://jobs:xxxxx@db.internal/engagement`"; err.Error() != want {
		t.Errorf("Redact with password \"a\" = %q, want %q", err, want)
	}
	if _, err := postgres.ParseConfig("postgres://u:hunter2@host:notaport/db", "test"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("ParseConfig error %v, want an error without the password", err)
	}
}
