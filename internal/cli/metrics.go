package cli

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/metrics"
)

// MetricsFlags configure the Pushgateway a run pushes its metrics to: the
// jobs', queue-process's and engagementctl verify's.
type MetricsFlags struct {
	pushgatewayURL string
	environment    string
	pusher         *metrics.Pusher // nil: no pushgateway, no HTTP at all
}

// Pushing reports whether the run's metrics are pushed (a Pushgateway is
// set), so that a command reads what only its push needs only then.
func (f *MetricsFlags) Pushing() bool { return f.pushgatewayURL != "" }

// Register adds --pushgateway-url and --metrics-environment to fs.
func (f *MetricsFlags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.pushgatewayURL, "pushgateway-url", "", "Prometheus Pushgateway to push the run's metrics to, e.g. http://pushgateway:9091")
	bindEnv(fs, "pushgateway-url", "PUSHGATEWAY_URL")
	markSecret(fs, "pushgateway-url")
	fs.StringVar(&f.environment, "metrics-environment", "", `the environment grouping label of the pushed metrics (e.g. "production"), so environments sharing a Pushgateway keep their own groups`)
	bindEnv(fs, "metrics-environment", "ENGAGEMENT_ENVIRONMENT")
}

// Validate checks the URL before any work (a usage error otherwise) and
// prepares the pusher. The message never repeats the URL: it may hold a
// password.
func (f *MetricsFlags) Validate() error {
	if f.pushgatewayURL == "" {
		return nil
	}
	if err := metrics.ValidateLabelValue(f.environment); err != nil {
		return Usagef("--metrics-environment (or ENGAGEMENT_ENVIRONMENT): %v", err)
	}
	p, err := metrics.NewPusher(f.pushgatewayURL)
	if err != nil {
		return Usagef("--pushgateway-url (or PUSHGATEWAY_URL): %v", err)
	}
	f.pusher = p
	return nil
}

// Push pushes the run that started at start and ends now with err (nil or
// --fail-on-partial's exit 3: completed; anything else: failed). It never
// changes the run's outcome: a failed push is a warning. It runs even when
// ctx was cancelled (SIGTERM), within the push's own timeout.
func (f *MetricsFlags) Push(ctx context.Context, log zerolog.Logger, start time.Time, r metrics.Run, err error) {
	if f.pusher == nil {
		return
	}
	r.End = time.Now()
	r.Duration = r.End.Sub(start)
	r.Environment = f.environment
	var exit *ExitError
	r.Failed = err != nil && !(errors.As(err, &exit) && exit.Code == ExitPartial)
	if r.Failed {
		r.Summary, r.Delivery = nil, nil
	}
	if pushErr := f.pusher.Push(context.WithoutCancel(ctx), r); pushErr != nil {
		log.Warn().Err(pushErr).Str("pushgateway", f.pusher.URL()).Msg("could not push metrics; the run's outcome stands")
		return
	}
	log.Info().Str("pushgateway", f.pusher.URL()).Bool("run_failed", r.Failed).Msg("metrics pushed")
}
