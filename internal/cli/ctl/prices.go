package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/pricing"
)

// pricesImportOptions is one engagementctl prices import.
type pricesImportOptions struct {
	cli.CmdIO
	card   pricing.RateCard
	output string

	prices *pricing.Prices // set by Validate
}

// newPricesCommand builds engagementctl prices and its import, which
// never connects to the database; runF, when not nil, replaces the run
// (see cli.RunOptions).
func newPricesCommand(runF func(*pricesImportOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prices",
		Short: "Meta's prices per country and category, the spend is costed at: import Meta's rate card",
		Args:  cobra.NoArgs,
		RunE:  missingSubcommand,
	}
	o := &pricesImportOptions{}
	importCmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Turn Meta's USD rate card (the CSV its pricing page links as \"USD rates\") into a prices file for --prices-file",
		Long: `Reads Meta's rate card in US dollars, the CSV file Meta's pricing page
(` + pricing.MetaPricingPage + `) links as "USD rates", and writes the
prices file status, funnel and the console read with --prices-file
(ENGAGEMENT_PRICES_FILE): each market Meta prices on its own becomes its
country (North America: every +1 number, as US); the groups ("Rest of
...", "Other") are left out, named in the file's note, and their recipients
counted as not priced. The card does not say when it takes effect: give
it with --effective. See docs/console.md, "What it costs".

Writes the JSON to stdout, or to --output (replaced whole, only once the
card was read whole). Exit 0; 2 when the card cannot be read whole (a
column missing, a rate that is not a price in US dollars, a currency other
than USD, a market twice) or a flag is wrong, with nothing written; 1 when
the output cannot be written. Needs no database.`,
		Args: cobra.ExactArgs(1),
		RunE: cli.RunOptions(o, runF),
	}
	fs := importCmd.Flags()
	fs.StringVar(&o.card.Effective, "effective", "", "the day the rate card takes effect, YYYY-MM-DD (the file's as_of)")
	fs.StringVar(&o.card.Source, "source", pricing.MetaPricingPage, "where the rate card comes from (the file's source)")
	fs.StringVar(&o.card.DefaultCountry, "default-country", "BR", "the country the forecast prices its goodbyes in (ISO 3166 alpha-2)")
	fs.StringVar(&o.output, "output", "-", "the prices file to write; - for stdout")
	cmd.AddCommand(importCmd)
	return cmd
}

// Validate reads the rate card: a card that cannot be read whole is a
// usage error, found before anything is written.
func (o *pricesImportOptions) Validate() error {
	if _, err := time.Parse(time.DateOnly, o.card.Effective); err != nil {
		return cli.Usagef("--effective %q: want the day the rate card takes effect, YYYY-MM-DD (Meta's file does not say it)", o.card.Effective)
	}
	f, err := os.Open(o.Args[0])
	if err != nil {
		return cli.UsageError(fmt.Errorf("rate card: %w", err))
	}
	defer f.Close()
	o.prices, err = pricing.ImportRateCard(f, o.card)
	if err != nil {
		if !errors.Is(err, pricing.ErrRateCard) {
			err = fmt.Errorf("rate card %s: %w", filepath.Base(o.Args[0]), err)
		}
		return cli.UsageError(err)
	}
	return nil
}

// Run writes the prices: to stdout, or to a file beside --output renamed
// over it, so that a reader never sees half of it.
func (o *pricesImportOptions) Run(context.Context) error {
	b, err := json.MarshalIndent(o.prices, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if o.output == "-" {
		_, err = o.Stdout.Write(b)
		return err
	}
	if err := writeWhole(o.output, b); err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.Stdout, "wrote %s: %d countries, as of %s\n", o.output, len(o.prices.Countries), o.prices.AsOf)
	return err
}

// writeWhole writes b to a temporary file in path's directory, then
// renames it to path.
func writeWhole(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write the prices: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone once renamed
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write the prices: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil { // as readable as a file the operator wrote
		tmp.Close()
		return fmt.Errorf("write the prices: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the prices: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write the prices: %w", err)
	}
	return nil
}
