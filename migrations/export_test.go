package migrations

// UpTo applies the embedded migrations up to version v, for tests that
// need a database as an earlier release left it.
func (mg *Migrator) UpTo(v uint) error {
	return mg.locked("migrate up", func() error { return mg.m.Migrate(v) })
}

// AddedColumns are the columns of the bot's tables that the scheduler's
// migrations add (its own, or the design's that a bot may lack): table →
// columns, as the adoption preflight knows them.
func AddedColumns() map[string][]string {
	out := map[string][]string{}
	for _, tbl := range botTables {
		for _, c := range tbl.columns {
			if c.role != botColumn {
				out[tbl.name] = append(out[tbl.name], c.name)
			}
		}
	}
	return out
}
