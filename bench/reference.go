package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// referenceDir holds the single-statement references the scheduler's Go
// benchmarks use too (relative to bench/, where the tool runs).
const referenceDir = "../scheduler/testdata"

var (
	referenceDaily  = []string{"reference_daily_inactivity.sql", "reference_daily_timeout.sql", "reference_daily_reminder.sql"}
	referenceWeekly = []string{"reference_weekly.sql"}
)

// referenceRunID is the job_run_id the references write, as the jobs write
// their run's id (partial indexes on it cost both sides the same).
const referenceRunID = 1

// runReference runs the reference statements in files, in order, on dbURL
// and returns their wall time and the rows they moved or queued (each
// statement's one row, or its rows affected).
func runReference(ctx context.Context, dbURL string, files []string) (seconds float64, rows int, err error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The references run as long as they need: at 10M users a statement
	// takes minutes.
	if _, err := conn.Exec(ctx, `SET statement_timeout = 0`); err != nil {
		return 0, 0, err
	}
	args := pgx.NamedArgs{"as_of": asOf, "day": asOf.Format(time.DateOnly), "week": isoWeek(asOf), "run_id": referenceRunID}
	var took time.Duration
	for _, f := range files {
		sql, err := os.ReadFile(filepath.Join(referenceDir, f))
		if err != nil {
			return 0, 0, fmt.Errorf("read the reference: %w", err)
		}
		start := time.Now()
		res, err := conn.Exec(ctx, string(sql), args)
		took += time.Since(start)
		if err != nil {
			return 0, 0, fmt.Errorf("reference %s: %w", f, err)
		}
		if res.Select() {
			// A SELECT count(*) FROM moved: Exec discards the row, so
			// count again from what the statement wrote.
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM engagement_state_transitions WHERE job_run_id = $1 AND trigger = $2`,
				referenceRunID, triggerOf[f]).Scan(&n); err != nil {
				return 0, 0, err
			}
			rows += n
		} else {
			rows += int(res.RowsAffected())
		}
	}
	return took.Seconds(), rows, nil
}

var triggerOf = map[string]string{
	"reference_daily_inactivity.sql": "inactivity_14d",
	"reference_daily_timeout.sql":    "goodbye_timeout",
	"reference_daily_reminder.sql":   "reminder_due",
}

// isoWeek is "2026-W48".
func isoWeek(t time.Time) string {
	y, w := t.UTC().ISOWeek()
	return fmt.Sprintf("%d-W%02d", y, w)
}

// runQueueBacklog runs queue-process for queueSeconds on dbURL, whose queue
// holds the weekly reviews, delivering to a local webhook; it returns the
// process's figures and how many messages it sent.
func runQueueBacklog(ctx context.Context, bin, dbURL string) (proc, int, error) {
	hook, err := startWebhook()
	if err != nil {
		return proc{}, 0, err
	}
	defer hook.srv.Close()
	var sum runSummary
	p, err := runBinary(ctx, bin, "queue-process", dbURL, &sum,
		"--transport=webhook", "--webhook-url="+hook.url, "--webhook-secret="+webhookSecret,
		"--send-interval=0", fmt.Sprintf("--max-duration=%ds", queueSeconds), "--log-level=warn", "--output=json")
	if err != nil {
		return proc{}, 0, err
	}
	if sum.Sent == 0 {
		return p, 0, fmt.Errorf("queue-process sent nothing from a queue of weekly reviews")
	}
	return p, sum.Sent, nil
}
