package postgres

import "github.com/jackc/pgx/v5/pgxpool"

// ParseConfig is parseConfig with the default connect timeout, for the
// tests of the configuration Open builds.
func ParseConfig(databaseURL, app string) (*pgxpool.Config, error) {
	return parseConfig(databaseURL, app, DefaultConnectTimeout)
}
