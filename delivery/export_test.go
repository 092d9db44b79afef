package delivery

import "time"

// SetCheckClock makes p read the time its send-time checks age by from
// clock: a test's own, to age them without waiting.
func SetCheckClock(p *Processor, clock func() time.Time) { p.clock = clock }
