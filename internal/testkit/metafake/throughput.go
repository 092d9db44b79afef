package metafake

import (
	"net/http"
	"sync"
	"time"
)

// throughput is the Graph fake's per-number throughput: above a ceiling of
// sends in one second, Meta answers error 130429 "Rate limit hit" (HTTP
// 400) until the number is within its level again (Meta, "Throughput",
// https://developers.facebook.com/documentation/business-messaging/whatsapp/throughput;
// the error's body as in
// https://developers.facebook.com/documentation/business-messaging/whatsapp/support/error-codes/).
// The fake counts the sends arriving in each second of the clock, refused
// ones included (a refused request still reached Meta).
type throughput struct {
	mu       sync.Mutex
	ceiling  int           // 0: none
	perSec   map[int64]int // arrivals by Unix second
	arrivals []time.Time   // every send's arrival
	refused  []time.Time   // the arrivals answered 130429
}

// rateLimitBody is Meta's 130429 answer.
const rateLimitBody = `{"error":{"message":"(#130429) Rate limit hit","type":"OAuthException","code":130429,` +
	`"error_data":{"messaging_product":"whatsapp","details":"Message failed to send because there were too many messages sent from this phone number in a short period of time"},` +
	`"fbtrace_id":"Az8or2yhqkZfEZ-_4Qn_Bam"}}`

// LimitPerSecond makes the number take at most n sends in any second of
// the clock and answer 130429 to the rest (0: no limit).
func (g *Graph) LimitPerSecond(n int) {
	g.pace.mu.Lock()
	defer g.pace.mu.Unlock()
	g.pace.ceiling = n
}

// Arrivals is when each send arrived, in order, refused ones included.
func (g *Graph) Arrivals() []time.Time {
	g.pace.mu.Lock()
	defer g.pace.mu.Unlock()
	return append([]time.Time(nil), g.pace.arrivals...)
}

// RateLimited is when each send answered 130429 arrived, in order.
func (g *Graph) RateLimited() []time.Time {
	g.pace.mu.Lock()
	defer g.pace.mu.Unlock()
	return append([]time.Time(nil), g.pace.refused...)
}

// refuse counts a send's arrival and answers 130429 when it is over the
// ceiling; it reports whether it did.
func (p *throughput) refuse(w http.ResponseWriter) bool {
	now := time.Now()
	p.mu.Lock()
	if p.perSec == nil {
		p.perSec = map[int64]int{}
	}
	p.arrivals = append(p.arrivals, now)
	p.perSec[now.Unix()]++
	over := p.ceiling > 0 && p.perSec[now.Unix()] > p.ceiling
	if over {
		p.refused = append(p.refused, now)
	}
	p.mu.Unlock()
	if over {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(rateLimitBody))
	}
	return over
}
