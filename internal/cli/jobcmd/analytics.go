package jobcmd

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/engagement-scheduler/engagement/internal/analytics"
	"github.com/engagement-scheduler/engagement/internal/cli"
	"github.com/engagement-scheduler/engagement/internal/cliflag"
	"github.com/engagement-scheduler/engagement/scheduler"
)

// analyticsFlags configure the optional PostHog events of the daily and
// weekly jobs: off unless an API key is set.
type analyticsFlags struct {
	apiKey  string
	host    string
	timeout time.Duration
}

func (f *analyticsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.apiKey, "posthog-api-key", "", "PostHog project API key: when set, the run's state changes and weekly reviews are sent as analytics events")
	cliflag.BindEnv(fs, "posthog-api-key", "POSTHOG_API_KEY")
	cliflag.MarkSecret(fs, "posthog-api-key")
	fs.StringVar(&f.host, "posthog-host", analytics.DefaultEndpoint, "PostHog host the events go to")
	cliflag.BindEnv(fs, "posthog-host", "POSTHOG_HOST")
	fs.DurationVar(&f.timeout, "posthog-timeout", analytics.DefaultTimeout, "longest the analytics events may take after the run; what is not sent by then is dropped")
}

// check reports why the analytics configuration cannot be used. Analytics
// never fail a run, so the caller logs this and runs without them.
func (f *analyticsFlags) check() string {
	u, err := url.Parse(strings.TrimSpace(f.host))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "--posthog-host must be an http or https URL"
	}
	if f.timeout <= 0 {
		return "--posthog-timeout must be positive"
	}
	return ""
}

// publish sends the run's analytics events once its batches have
// committed: only for a real run, and only with an API key. It never fails
// the job and never outlasts --posthog-timeout (plus a second); trouble is
// one warning. Neither the key nor the events' content is logged.
func (a analyticsFlags) publish(ctx context.Context, pool *pgxpool.Pool, log zerolog.Logger, sum *scheduler.Summary, secrets cli.Secrets) {
	if a.apiKey == "" || sum == nil || sum.DryRun || sum.RunID == 0 {
		return
	}
	log = log.With().Int64("run_id", sum.RunID).Logger()
	if problem := a.check(); problem != "" {
		log.Warn().Msg("analytics events not sent: " + problem)
		return
	}
	start := time.Now()
	res, err := analytics.PublishRun(ctx, pool, sum.RunID, analytics.Config{
		APIKey:   a.apiKey,
		Endpoint: strings.TrimSpace(a.host),
		Timeout:  a.timeout,
		Logger:   log,
	})
	ev, msg := log.Info(), "analytics events published"
	if err != nil {
		ev, msg = log.Warn().Str("error", secrets.Scrub(err).Error()), "analytics events not all published; the run is unaffected"
	}
	ev.Int("events", res.Events).Int("sent", res.Sent).Int("failed", res.Failed).
		Int64("duration_ms", time.Since(start).Milliseconds()).Msg(msg)
}
