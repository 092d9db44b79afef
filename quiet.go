package engagement

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// QuietHours are a daily span in which no message is sent: from Start to
// End after midnight, wrapping midnight when End is not after Start
// (21:00-08:00). The zero value is none.
type QuietHours struct {
	Start, End time.Duration
	on         bool
}

// Set reports whether q holds quiet hours.
func (q QuietHours) Set() bool { return q.on }

// Contains reports whether the time of day clock (since midnight) is inside
// q, as the claim decides it: from Start, up to but not including End.
func (q QuietHours) Contains(clock time.Duration) bool {
	switch {
	case !q.on:
		return false
	case q.Start < q.End:
		return clock >= q.Start && clock < q.End
	default:
		return clock >= q.Start || clock < q.End
	}
}

// String formats q as HH:MM-HH:MM ("" when unset).
func (q QuietHours) String() string {
	if !q.on {
		return ""
	}
	clock := func(d time.Duration) string {
		return fmt.Sprintf("%02d:%02d", int(d.Hours()), int(d.Minutes())%60)
	}
	return clock(q.Start) + "-" + clock(q.End)
}

// ParseQuietHours reads "HH:MM-HH:MM" (24-hour clock, may wrap midnight).
// Start and end must differ.
func ParseQuietHours(s string) (QuietHours, error) {
	from, to, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return QuietHours{}, fmt.Errorf("%q is not HH:MM-HH:MM", s)
	}
	start, err := parseClock(from)
	if err != nil {
		return QuietHours{}, fmt.Errorf("%q: %w", s, err)
	}
	end, err := parseClock(to)
	if err != nil {
		return QuietHours{}, fmt.Errorf("%q: %w", s, err)
	}
	if start == end {
		return QuietHours{}, fmt.Errorf("%q: start and end are the same", s)
	}
	return QuietHours{Start: start, End: end, on: true}, nil
}

// parseClock reads HH:MM, 00:00 to 23:59: two ASCII digits each, nothing
// else (strconv alone takes "+1" for 01).
func parseClock(s string) (time.Duration, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hour, errH := strconv.Atoi(h)
	minute, errM := strconv.Atoi(m)
	if !ok || errH != nil || errM != nil || !twoDigits(h) || !twoDigits(m) || hour > 23 || minute > 59 {
		return 0, fmt.Errorf("%q is not a time of day HH:MM", s)
	}
	return time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute, nil
}

// twoDigits reports whether s is exactly two ASCII digits.
func twoDigits(s string) bool {
	return len(s) == 2 && s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9'
}
