package migrations_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	connect := func(url string) *pgx.Conn {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}

	empty := connect(pgtest.NewEmptyDatabase(t))
	err := migrations.Check(ctx, empty)
	if !errors.Is(err, migrations.ErrSchemaOutdated) || !strings.Contains(err.Error(), "engagementctl migrate up") {
		t.Errorf("Check on an empty database = %v, want ErrSchemaOutdated pointing at engagementctl migrate up", err)
	}

	migratedURL := pgtest.NewDatabase(t)
	migrated := connect(migratedURL)
	if err := migrations.Check(ctx, migrated); err != nil {
		t.Errorf("Check on a migrated database = %v, want nil", err)
	}

	// A schema behind this binary.
	if _, err := migrated.Exec(ctx, `UPDATE `+migrations.Table+` SET version = version - 1`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Check(ctx, migrated); !errors.Is(err, migrations.ErrSchemaOutdated) || !strings.Contains(err.Error(), "needs") {
		t.Errorf("Check on an older schema = %v, want ErrSchemaOutdated naming the version needed", err)
	}
	// A migration that failed half-way.
	if _, err := migrated.Exec(ctx, `UPDATE `+migrations.Table+` SET version = $1, dirty = true`, migrations.Latest); err != nil {
		t.Fatal(err)
	}
	err = migrations.Check(ctx, migrated)
	wantFix := "engagementctl migrate force"
	if !errors.Is(err, migrations.ErrSchemaOutdated) || !strings.Contains(err.Error(), "dirty") || !strings.Contains(err.Error(), wantFix) {
		t.Errorf("Check on a dirty schema = %v, want ErrSchemaOutdated saying dirty and naming the fix, %s", err, wantFix)
	}
}

func TestUpIsIdempotentAndDownReverts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewEmptyDatabase(t)
	m, err := migrations.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 2 {
		if err := m.Up(); err != nil {
			t.Fatalf("Up #%d: %v", i+1, err)
		}
		if v, dirty, err := m.Version(); err != nil || v != migrations.Latest || dirty {
			t.Fatalf("after Up #%d: version %d dirty %v err %v, want %d clean", i+1, v, dirty, err, migrations.Latest)
		}
	}
	if err := m.Down(int(migrations.Latest)); err != nil {
		t.Fatal(err)
	}
	if v, _, err := m.Version(); err != nil || v != 0 {
		t.Errorf("after Down: version %d (%v), want 0", v, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if tables := fixture.Tables(t, conn, migrations.Table); tables != 0 {
		t.Errorf("%d tables left after migrating all the way down, want 0", tables)
	}
}
