package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/internal/seed"
)

// seedResult is what engagementctl seed prints with --output json.
type seedResult struct {
	Users      int            `json:"users"`
	Seed       int64          `json:"seed"`
	AsOf       time.Time      `json:"as_of"`
	DurationMS int64          `json:"duration_ms"`
	Stats      seedStatsJSON  `json:"stats"`
	ByState    map[string]int `json:"by_state"`
}

type seedStatsJSON struct {
	Users        int            `json:"users"`
	OptedOut     int            `json:"opted_out"`
	Transactions int            `json:"transactions"`
	ByCategory   map[string]int `json:"by_category"`
}

// seedOptions is one (hidden) engagementctl seed.
type seedOptions struct {
	cli.CmdIO
	timeFlags
	cli.DBOptions
	users int
	seed  int64
	force bool
}

// newSeedCommand builds the hidden `engagementctl seed`: the benchmarks'
// data generator (package seed), for a database made for measuring.
func newSeedCommand(databaseURL *string, runF func(*seedOptions) error) *cobra.Command {
	o := &seedOptions{DBOptions: cli.DBOptions{DBURL: databaseURL}}
	cmd := &cobra.Command{
		Use:    "seed",
		Short:  "Fill an empty database with generated users (for benchmarks)",
		Hidden: true,
		Long: `Generates --users users with the benchmarks' mix (package internal/seed:
30% inactive 14+ days, 10% expired goodbyes, 5% due reminders, 5% opted
out, 40% with transactions in the week), relative to --as-of, in one
set-based statement. The same --seed and --as-of give identical rows.
It refuses a database that already holds users (exit 2) unless --force;
a different --seed then adds disjoint users, the same one fails on the
primary key (exit 1). Never point it at a production database.`,
		Args: cobra.NoArgs,
		RunE: cli.RunOptions(o, runF),
	}
	o.timeFlags.registerAsOf(cmd, "", "the instant the mix is relative to, RFC3339 (required)")
	fs := cmd.Flags()
	fs.IntVar(&o.users, "users", 0, "how many users to generate (required)")
	fs.Int64Var(&o.seed, "seed", 1, "the generator's seed: the same seed gives the same rows")
	fs.BoolVar(&o.force, "force", false, "add users to a database that already has some")
	return cmd
}

func (o *seedOptions) Validate() error {
	if o.users < 1 || o.users > seed.MaxUsers {
		return cli.Usagef("--users must be from 1 to %d, got %d", seed.MaxUsers, o.users)
	}
	if err := o.asOf.Check(); err != nil {
		return err
	}
	if o.asOf.Time().IsZero() {
		return cli.Usagef("--as-of is required: the instant the mix is relative to (e.g. the jobs' --as-of)")
	}
	return o.timeFlags.validate(*o.DBURL)
}

func (o *seedOptions) Run(ctx context.Context) error {
	pool := o.Pool
	at := o.asOf.Time()
	existing, err := seed.ExistingUsers(ctx, pool)
	if err != nil {
		return fmt.Errorf("count existing users: %w", err)
	}
	if existing > 0 && !o.force {
		return cli.Usagef("the database already has %d users; seed fills empty benchmark databases (--force adds to it)", existing)
	}
	start := time.Now()
	// Generating is one statement meant to run long (minutes at 10M
	// users): no statement timeout but the command's own context.
	genCtx := postgres.WithStatementTimeout(ctx, 0)
	st, err := seed.Generate(genCtx, pool, seed.Options{Users: o.users, Seed: o.seed, AsOf: at})
	if err != nil {
		return err
	}
	took := time.Since(start)
	if o.output == "json" {
		return json.NewEncoder(o.Stdout).Encode(seedResult{
			Users: o.users, Seed: o.seed, AsOf: at, DurationMS: took.Milliseconds(), ByState: st.ByState,
			Stats: seedStatsJSON{Users: st.Users, OptedOut: st.OptedOut, Transactions: st.Transactions, ByCategory: st.ByCategory},
		})
	}
	fmt.Fprintf(o.Stdout, "seeded %d users (seed %d, as of %s) in %s; the database now has %d users, %d transactions\n",
		o.users, o.seed, at.Format(time.RFC3339), took.Round(time.Millisecond), st.Users, st.Transactions)
	return nil
}
