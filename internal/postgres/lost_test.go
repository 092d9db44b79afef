package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// TestIsConnectionLost: the errors after which the jobs run a batch again on
// a new connection, and those after which they must not.
func TestIsConnectionLost(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("move batch: %w", &pgconn.PgError{Code: code}) }
	tests := []struct {
		name string
		err  error
		lost bool
	}{
		{"terminated by pg_terminate_backend", pg("57P01"), true},
		{"server crashed", pg("57P02"), true},
		{"server starting or stopping", pg("57P03"), true},
		{"connection failure", pg("08006"), true},
		{"connection dropped (no server verdict)", fmt.Errorf("move batch: %w", io.ErrUnexpectedEOF), true},
		{"statement timeout", pg("57014"), false},
		{"raised by a trigger", pg("P0001"), false},
		{"too many connections", pg("53300"), false},
		{"syntax error", pg("42601"), false},
		{"cancelled", context.Canceled, false},
		{"deadline", fmt.Errorf("move batch: %w", context.DeadlineExceeded), false},
		{"connect refused", fmt.Errorf("acquire: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"connection reset", fmt.Errorf("move batch: %w", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), true},
		{"closed by pgx", fmt.Errorf("move batch: %w", pgconn.ErrConnClosed), true},
		{"a client error (issue 18)", errors.New("number of field descriptions must equal number of destinations, got 7 and 6"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		if got := postgres.IsConnectionLost(tt.err); got != tt.lost {
			t.Errorf("%s: IsConnectionLost = %v, want %v", tt.name, got, tt.lost)
		}
	}
}
