package delivery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/engagement-scheduler/engagement"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// Meta's verdict on a Cloud API number (issue 46). At start, a run on a
// transport that can read its number's health (transport.HealthReader:
// whatsapp-cloud) asks the Graph API for the quality rating, the business
// portfolio's messaging limit (whatsapp_business_manager_messaging_limit,
// as a tier word; sender/transport/messaging_limit.go) and the number's
// status, records what it got
// (engagement_number_health, health_save.sql), and reads what is known,
// with the templates Meta paused or disabled (engagement_template_status,
// written by the console's webhook; health_read.sql). Then:
//
//   - --daily-limit auto follows the portfolio's limit (transport.TierLimit);
//     with none ever read, the one a new portfolio starts at, 250; its
//     budget is the portfolio's, counting only the recipients outside a
//     customer service window (portfolio.go);
//   - while the rating is RED or the number FLAGGED, the marketing kinds
//     wait (deferred_reason quality) and the rest still go;
//   - a message whose template is PAUSED or DISABLED waits
//     (template_paused), and goes once the template is back.
//
// A lying Graph API (not JSON, a 500, a field of the wrong type or
// missing, no answer in 5 s) changes nothing it did not say right: the run
// keeps the last known values, logs a warning saying so, and goes on.
// Nothing known at all is the safe side: the lowest tier, and no hold.

// VerdictRecheck is how long a message held by Meta's verdict waits
// before the claim looks again.
const VerdictRecheck = time.Hour

// DefaultAutoLimit is --daily-limit auto's limit while no limit was ever
// read: a new business portfolio's messaging limit (Meta, "Messaging
// limits": https://developers.facebook.com/documentation/business-messaging/whatsapp/messaging-limits).
const DefaultAutoLimit = 250

// NumberHealth is engagement.NumberHealth: the root package holds the types
// the application packages share.
type NumberHealth = engagement.NumberHealth

// verdict is what the claim applies.
type metaVerdict struct {
	qualityHold bool
	paused      []string // message keys whose template is paused
}

func (v metaVerdict) pausedKeys() []string {
	if v.paused == nil {
		return []string{}
	}
	return v.paused
}

// readVerdict reads Meta's verdict at the start of a run (see above) and
// sets the run's verdict and, with DailyLimitAuto, its daily limit.
func (r *run) readVerdict(ctx context.Context) (*NumberHealth, error) {
	r.verdict = metaVerdict{}
	hr, ok := r.cfg.Transport.(transport.HealthReader)
	if !ok {
		return nil, nil
	}
	name := r.cfg.Transport.Name()
	h, readErr := hr.ReadHealth(ctx)
	stale := readErr != nil
	if readErr == nil {
		args := healthSaveArgs{Transport: name, ClockOffset: r.cfg.ClockOffset, Source: "graph_api",
			QualityRating: nullIfEmpty(h.QualityRating), MessagingLimitTier: nullIfEmpty(h.MessagingLimitTier),
			Flagged: h.Flagged}
		if _, err := healthSaveQuery.Exec(ctx, r.pool, args); err != nil {
			return nil, fmt.Errorf("record the number's health: %w", err)
		}
		if len(h.Problems) > 0 {
			stale = true
			r.log.Warn().Str("problems", strings.Join(h.Problems, "; ")).
				Msg("the Graph API's answer about the number's health is incomplete; keeping the last known values for what it did not say")
		}
	} else {
		r.log.Warn().Str("error", readErr.Error()).
			Msg("could not read the number's health from the Graph API; keeping the last known values (none: the lowest tier, no hold)")
	}
	known, err := healthReadQuery.One(ctx, r.pool, healthReadArgs{Transport: name})
	if err != nil {
		return nil, fmt.Errorf("read the number's health: %w", err)
	}
	flagged, templates := known.Flagged, known.PausedTemplates
	out := &NumberHealth{QualityRating: deref(known.QualityRating), MessagingLimitTier: deref(known.MessagingLimitTier),
		Flagged: flagged, ReadAt: known.ReadAt, PausedTemplates: templates, Stale: stale}
	out.Holding = out.QualityRating == "RED" || flagged
	r.verdict.qualityHold = out.Holding
	keys := hr.TemplateKeys()
	for _, t := range templates {
		r.verdict.paused = append(r.verdict.paused, keys[t]...)
	}
	slices.Sort(r.verdict.paused)
	if r.cfg.DailyLimitAuto {
		limit, ok := transport.TierLimit(out.MessagingLimitTier)
		if !ok {
			limit = DefaultAutoLimit
		}
		r.cfg.DailyLimit = limit
	}
	ev := r.log.Info()
	if out.Holding || len(templates) > 0 {
		ev = r.log.Warn()
	}
	ev.Str("quality_rating", out.QualityRating).Str("messaging_limit_tier", out.MessagingLimitTier).
		Bool("flagged", flagged).Strs("paused_templates", templates).Int("daily_limit", r.cfg.DailyLimit).
		Bool("holding_marketing", out.Holding).Msg("Meta's verdict on the number")
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func canReadHealth(t transport.Transport) bool {
	_, ok := t.(transport.HealthReader)
	return ok
}
