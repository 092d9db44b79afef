package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// DumpSchema returns the schema of the database dbURL names as pg_dump
// --schema-only --no-owner prints it, normalised so the same schema always
// gives the same text: without pg_dump's version lines, its per-run
// \restrict key, and runs of blank lines. pg_dump is taken beside the
// pg_ctl the throwaway cluster uses (the same binaries, so the same
// version as the server the kit started), else from PATH; the second
// result names it and its version ("pg_dump (PostgreSQL) 15.20 …").
func DumpSchema(ctx context.Context, dbURL string) (dump, version string, err error) {
	pgDump, err := pgDumpBinary(ctx)
	if err != nil {
		return "", "", err
	}
	out, err := exec.CommandContext(ctx, pgDump, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s --version: %w", pgDump, err)
	}
	version = strings.TrimSpace(string(out))
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, pgDump, "--schema-only", "--no-owner", "--dbname", dbURL)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("%s --schema-only on %s: %w: %s", pgDump, redact(dbURL), err, strings.TrimSpace(stderr.String()))
	}
	return NormalizeDump(stdout.String()), version, nil
}

var (
	dumpNoise  = regexp.MustCompile(`(?m)^(\\(un)?restrict .*|-- Dumped (from database|by pg_dump) version .*)\n`)
	blankLines = regexp.MustCompile(`\n{3,}`)
)

// NormalizeDump takes out of a pg_dump what changes from run to run or
// from one minor version to the next with the schema unchanged.
func NormalizeDump(s string) string {
	s = dumpNoise.ReplaceAllString(s, "")
	s = blankLines.ReplaceAllString(s, "\n\n")
	return strings.TrimSpace(s) + "\n"
}

// pgDumpBinary finds pg_dump beside the pg_ctl the kit uses (a symlink
// followed), installing the postgresql package first if the binaries are
// missing, else in PATH.
func pgDumpBinary(ctx context.Context) (string, error) {
	bins, err := findOrInstallPostgres(ctx)
	if err != nil {
		p, lookErr := exec.LookPath("pg_dump")
		if lookErr != nil {
			return "", fmt.Errorf("no pg_dump: %w", errors.Join(err, lookErr))
		}
		return p, nil
	}
	return bins.sibling("pg_dump")
}

// sibling finds the binary name beside the pg_ctl in use (a symlink
// followed), of the same version as the server, else in PATH.
func (b pgBinaries) sibling(name string) (string, error) {
	ctl := b.pgCtl
	if real, err := filepath.EvalSymlinks(ctl); err == nil {
		ctl = real
	}
	if p := filepath.Join(filepath.Dir(ctl), name); isExecutable(p) {
		return p, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is neither beside %s nor in PATH: %w", name, ctl, err)
	}
	return p, nil
}
