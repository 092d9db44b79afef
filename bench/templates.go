package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// templates are the seeded databases given with -template-db, by their
// number of users. A suite that needs a size one of them holds copies it
// (CREATE DATABASE … TEMPLATE, as it copies a database it seeded itself)
// instead of seeding: a 10M-user seed takes half an hour, and the same
// database can then serve several runs. They must have been seeded with
// engagementctl seed --seed 1 --as-of 2026-11-23T06:00:00Z (what the tool
// seeds); the tool only reads them, and never drops them.
type templates struct {
	byUsers map[int]string
}

// loadTemplates finds the databases named in list (comma-separated) on the
// server and counts their users.
func loadTemplates(ctx context.Context, list string) (*templates, error) {
	t := &templates{byUsers: map[int]string{}}
	if strings.TrimSpace(list) == "" {
		return t, nil
	}
	srv, err := pgtest.ServerURL(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		u, err := pgtest.WithDatabase(srv, name)
		if err != nil {
			return nil, err
		}
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("-template-db %s: %w", name, err)
		}
		var users int
		err = conn.QueryRow(ctx, `SELECT count(*) FROM user_profiles`).Scan(&users)
		conn.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("-template-db %s: count its users: %w", name, err)
		}
		if users == 0 {
			return nil, fmt.Errorf("-template-db %s holds no users: seed it first (engagementctl seed --users N --as-of %s)", name, asOf.Format(time.RFC3339))
		}
		if other, ok := t.byUsers[users]; ok {
			return nil, fmt.Errorf("-template-db: %s and %s both hold %d users", other, name, users)
		}
		t.byUsers[users] = name
		fmt.Printf("template: %s holds %d users (its copies replace seeding that size)\n", name, users)
	}
	return t, nil
}

// source returns a seeded database of n users: a template's, or a new one,
// engagement_benchtool_<n>, seeded by bin/engagementctl (whose run is
// returned; empty for a template).
func (t *templates) source(ctx context.Context, bin string, n int) (name, dbURL string, seedRun proc, err error) {
	if name, ok := t.byUsers[n]; ok {
		srv, err := pgtest.ServerURL(ctx)
		if err != nil {
			return "", "", proc{}, err
		}
		dbURL, err := pgtest.WithDatabase(srv, name)
		return name, dbURL, proc{}, err
	}
	name = fmt.Sprintf("engagement_benchtool_%d", n)
	if dbURL, err = pgtest.CreateDatabase(ctx, name); err != nil {
		return "", "", proc{}, err
	}
	seedRun, err = runBinary(ctx, bin, "engagementctl", withOptions(dbURL, os.Getenv("BENCH_SEED_URL_OPTIONS")), nil,
		"seed", fmt.Sprint("--users=", n), "--seed=1", "--as-of="+asOf.Format(time.RFC3339), "--output=json")
	if err != nil {
		_ = pgtest.DropDatabase(context.WithoutCancel(ctx), name)
		return "", "", proc{}, err
	}
	return name, dbURL, seedRun, nil
}

// done drops a database source made, and leaves a template alone.
func (t *templates) done(ctx context.Context, name string) {
	for _, tmpl := range t.byUsers {
		if tmpl == name {
			return
		}
	}
	_ = pgtest.DropDatabase(context.WithoutCancel(ctx), name)
}
