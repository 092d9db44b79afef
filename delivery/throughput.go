package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/engagement-scheduler/engagement"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// Meta's throughput (issue 57). Meta allows each Cloud API number 80
// messages per second, 1,000 once upgraded, 20 while it is in use with the
// WhatsApp Business app too, inbound messages included, and answers error
// 130429 to what comes above it "until you are within your allowed level
// again" (Meta, "Throughput",
// https://developers.facebook.com/documentation/business-messaging/whatsapp/throughput;
// error codes:
// https://developers.facebook.com/documentation/business-messaging/whatsapp/support/error-codes/).
//
// At start, a run on a transport that reads its number's throughput
// (transport.ThroughputReader: whatsapp-cloud) works out the ceiling
// (ceilingOf) and never starts requests faster than it, across its workers
// (a token bucket, golang.org/x/time/rate, a little under the ceiling).
// Paced (--send-interval), the shared pace of every process is floored at
// one send per 1/ceiling too, so that processes together stay under it.
//
// A 130429 slows the whole run, not just its message: every worker waits
// throttlePause (or Meta's Retry-After, if longer; Meta documents neither
// a header nor a wait for 130429), and the rate halves, once per pause,
// however many requests in flight the same second turned away; each
// throttleCalm without one doubles it back, up to the ceiling. The message
// stays pending, its retry unspent, and goes after the pause.

// throttlePause is how long every worker waits after a 130429: Meta counts
// per second.
const throttlePause = time.Second

// throttleCalm is how long without a 130429 doubles a slowed rate back.
const throttleCalm = time.Minute

// throttleMargin: the bucket runs at the ceiling less 1/throttleMargin of
// it, so that a second at Meta holds no more than the ceiling although
// requests arrive a little bunched by the network.
const throttleMargin = 20

// Throughput is engagement.Throughput: the root package holds the types
// the application packages share.
type Throughput = engagement.Throughput

// throttle is the run's limit on its requests' rate.
type throttle struct {
	ceiling float64 // requests a second at most (the bucket's rate less the margin)
	lim     *rate.Limiter
	hits    atomic.Int64

	mu          sync.Mutex
	pausedUntil time.Time // no request starts before it
	lastCut     time.Time // the last halving
	calmSince   time.Time // the last 130429, or doubling back
}

func newThrottle(ceiling int) *throttle {
	r := float64(ceiling) * (1 - 1.0/throttleMargin)
	return &throttle{ceiling: r, lim: rate.NewLimiter(rate.Limit(r), 1)}
}

// wait blocks until the run may start a request: after any pause, at the
// bucket's rate.
func (t *throttle) wait(ctx context.Context) error {
	for {
		if !sleep(ctx, t.paused()) {
			return ctx.Err()
		}
		if err := t.lim.Wait(ctx); err != nil {
			return err
		}
		if t.paused() <= 0 {
			return nil
		}
		// A 130429 came while it waited its turn: wait the pause too.
	}
}

// paused is how long until the pause ends (<= 0: none), and doubles a
// slowed rate back after throttleCalm without a 130429.
func (t *throttle) paused() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if r := float64(t.lim.Limit()); r < t.ceiling && now.Sub(t.calmSince) >= throttleCalm {
		t.lim.SetLimitAt(now, rate.Limit(min(2*r, t.ceiling)))
		t.calmSince = now
	}
	return t.pausedUntil.Sub(now)
}

// hit takes a 130429 (Meta asked to wait retryAfter, 0: nothing said):
// every request waits the pause, and the rate halves once per pause. It
// returns the pause.
func (t *throttle) hit(retryAfter time.Duration) time.Duration {
	t.hits.Add(1)
	pause := max(retryAfter, throttlePause)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if now.Sub(t.lastCut) >= pause {
		t.lim.SetLimitAt(now, max(t.lim.Limit()/2, 1))
		t.lastCut = now
	}
	t.calmSince = now
	t.pausedUntil = maxTime(t.pausedUntil, now.Add(pause))
	return pause
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// rateLimited reports whether err is Meta's 130429 and, if so, slows the
// run (hit) and returns how long its message waits.
func (r *run) rateLimited(err error) (time.Duration, bool) {
	var terr *transport.Error
	if r.throttle == nil || !errors.As(err, &terr) || terr.ProviderCode != 130429 {
		return 0, false
	}
	return r.throttle.hit(terr.RetryAfter), true
}

// readThroughput works out the run's ceiling at start and sets its
// throttle; nil on a transport that does not read one.
func (r *run) readThroughput(ctx context.Context) (*Throughput, error) {
	r.throttle = nil
	tr, ok := r.cfg.Transport.(transport.ThroughputReader)
	if !ok {
		return nil, nil
	}
	read, readErr := tr.ReadThroughput(ctx)
	known, err := throughputQuery.One(ctx, r.pool, throughputArgs{PhoneNumberID: tr.NumberID(), OnBizApp: read.OnBizApp})
	if err != nil {
		return nil, fmt.Errorf("record the number's throughput: %w", err)
	}
	flag, coexistence := tr.ThroughputLimits()
	meta := read.Ceiling()
	if readErr != nil {
		meta = 0
	}
	out := &Throughput{Level: read.Level}
	out.CeilingMPS, out.Source = ceilingOf(meta, flag, coexistence || known.OnBizApp)
	r.throttle = newThrottle(out.CeilingMPS)
	ev := r.log.Info()
	switch {
	case readErr != nil:
		ev = r.log.Warn().Str("error", readErr.Error())
	case len(read.Problems) > 0:
		ev = r.log.Warn().Str("problems", strings.Join(read.Problems, "; "))
	}
	ev.Int("ceiling_mps", out.CeilingMPS).Str("source", out.Source).Str("level", out.Level).
		Msg("the number's throughput ceiling (an answer the Graph API did not give keeps the safe side)")
	return out, nil
}

// ceilingOf is the run's ceiling in messages a second, and where it came
// from: Meta's level (meta, 0: not read), else the operator's flag (0:
// none), else 80; never above the flag; 20 on the Business app.
func ceilingOf(meta, flag int, onBizApp bool) (int, string) {
	ceiling, source := transport.ThroughputStandard, "default"
	switch {
	case meta > 0:
		ceiling, source = meta, "graph_api"
	case flag > 0:
		ceiling, source = flag, "flag"
	}
	if flag > 0 && flag < ceiling {
		ceiling, source = flag, "flag"
	}
	if onBizApp && ceiling >= transport.ThroughputCoexistence {
		ceiling, source = transport.ThroughputCoexistence, "business_app"
	}
	return ceiling, source
}

// floorPace keeps the shared pace (--send-interval) at least one send per
// 1/ceiling apart, so that the processes sharing it stay under the
// number's ceiling together.
func (r *run) floorPace() {
	if r.pacer == nil || r.throughput == nil {
		return
	}
	least := time.Second / time.Duration(r.throughput.CeilingMPS)
	if r.pacer.interval < least {
		r.pacer.interval, r.plan.Interval = least, least
	}
}

// throughputState is the summary's Throughput: the ceiling as read, the
// rate the run ended at and the 130429s.
func (r *run) throughputState() *Throughput {
	if r.throughput == nil {
		return nil
	}
	out := *r.throughput
	out.RateMPS = float64(r.throttle.lim.Limit())
	out.RateLimited = int(r.throttle.hits.Load())
	return &out
}
