package migrations

// UpTo applies the embedded migrations up to version v, for tests that
// need a database as an earlier release left it.
func (mg *Migrator) UpTo(v uint) error {
	return mg.locked("migrate up", func() error { return mg.m.Migrate(v) })
}
