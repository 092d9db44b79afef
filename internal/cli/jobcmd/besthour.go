package jobcmd

import (
	"strconv"

	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// bestHourFlags are engagement-daily's --best-hour and --best-hour-percent.
type bestHourFlags struct {
	on      bool
	percent percentValue
}

func (f *bestHourFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.on, "best-hour", false, "schedule each goodbye at the hour of day, in the user's zone, at which the user most often wrote in the last 90 days (at least 3 messages), the next time it comes within 24 hours and outside --quiet-hours; others keep the run's time (docs/timing.md)")
	cliflag.BindEnv(fs, "best-hour", "ENGAGEMENT_BEST_HOUR")
	fs.Var(&f.percent, "best-hour-percent", "--best-hour for about this percent (0-100) of the users, chosen by user id, the run's time for the others; each goodbye's move records its arm, for engagementctl funnel to compare (docs/timing.md)")
	cliflag.BindEnv(fs, "best-hour-percent", "ENGAGEMENT_BEST_HOUR_PERCENT")
}

// bestHour is the run's scheduler.BestHour: off unless --best-hour or
// --best-hour-percent is given; the percent, when given, wins over
// --best-hour's 100.
func (o *jobOptions) bestHour() scheduler.BestHour {
	b := scheduler.BestHour{On: o.bestHourFlags.on || o.bestHourFlags.percent.set, Percent: 100}
	if o.bestHourFlags.percent.set {
		b.Percent = o.bestHourFlags.percent.v
	}
	b.QuietHours, b.Timezone = o.jobFlags.delivery.QuietHours()
	return b
}

// validateBestHour checks the percent (a usage error, exit 2).
func (o *jobOptions) validateBestHour() error {
	if err := o.bestHour().Validate(); err != nil {
		return cli.Usagef("--best-hour-percent (or ENGAGEMENT_BEST_HOUR_PERCENT): %v", err)
	}
	return nil
}

// percentValue is a float flag that knows whether it was given (on the
// command line or from the environment): an explicit 0 is a run whose
// every goodbye is in the run-time arm, not a run without arms.
type percentValue struct {
	v   float64
	set bool
}

func (p *percentValue) String() string {
	if !p.set {
		return ""
	}
	return strconv.FormatFloat(p.v, 'f', -1, 64)
}

func (p *percentValue) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	p.v, p.set = v, true
	return nil
}

func (p *percentValue) Type() string { return "float" }
