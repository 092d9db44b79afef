package migrations_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/migrations"
)

// Migration 54 replaces engagement_opt_out with a five-argument form (the
// confirmation). A bot role deploy/sql/roles.sql gave EXECUTE on the old
// one keeps it on the new one, both ways: an upgrade must not take the
// bot's opt-out away until someone re-runs roles.sql.
func TestOptOutKeepsItsGrantsAcrossMigration54(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	role := fmt.Sprintf("test_bot_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, `CREATE ROLE `+role+` NOLOGIN`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(ctx, `DROP OWNED BY `+role+`; DROP ROLE `+role) })
	m, err := migrations.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	after := 0 // versions from 54 on
	for _, v := range migrations.Versions() {
		if v >= 54 {
			after++
		}
	}
	may := func(signature string) bool {
		t.Helper()
		return fixture.MayExecute(t, conn, role, signature)
	}
	const old, current = "engagement_opt_out(uuid, text, timestamptz, text)", "engagement_opt_out(uuid, text, timestamptz, text, boolean)"

	if err := m.Down(after); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `GRANT EXECUTE ON FUNCTION `+old+` TO `+role); err != nil {
		t.Fatal(err)
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	if !may(current) {
		t.Errorf("after migrate up: %s may not execute %s; want the grant it had on the old form kept", role, current)
	}
	if fixture.MayExecute(t, conn, "public", current) {
		t.Errorf("PUBLIC may execute %s; want not", current)
	}
	if err := m.Down(after); err != nil {
		t.Fatal(err)
	}
	if !may(old) {
		t.Errorf("after migrating back down: %s may not execute %s; want the grant kept", role, old)
	}
}
