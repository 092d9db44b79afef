package console

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// goodbyeKind is the goodbye's kind, whose key finds a user's goodbye.
var goodbyeKind, _ = sm.KindOf(sm.GoodbyeMessage)

// GoodbyeBackoff is why a user's next goodbye waits after goodbyes that
// failed for good (issue 55; the daily job's goodbye_timeout records it on
// the user's row, migration 67): how many failed in a row since the user
// last wrote, the last one's WhatsApp code and what it means, and until
// when the next one waits, or that none goes until the user writes.
type GoodbyeBackoff struct {
	Failures int        `json:"failures"`
	Code     string     `json:"code,omitempty"`
	Meaning  string     `json:"meaning,omitempty"`
	Until    *time.Time `json:"until,omitempty"`
	// UntilTheyWrite is true when no goodbye goes until the user writes:
	// the code's schedule is over.
	UntilTheyWrite bool `json:"until_they_write,omitempty"`
	// Why says it in one sentence, for the page.
	Why string `json:"why"`
}

// goodbyeBackoff reads the user's row: nil when no goodbye waits.
func goodbyeBackoff(failures *int, until *time.Time, held bool, code string) *GoodbyeBackoff {
	if until == nil && !held {
		return nil
	}
	b := &GoodbyeBackoff{Code: code, Meaning: whatsAppCodes[code], Until: until, UntilTheyWrite: held}
	if failures != nil {
		b.Failures = *failures
	}
	schedule := days(sm.UndeliverableBackoff) + " apart"
	if code == sm.CodeEcosystemLimit {
		schedule = days(sm.EcosystemLimitBackoff) + " apart, as Meta asks for this code (growing intervals, never at once)"
	}
	failed := fmt.Sprintf("%d goodbye(s) in a row failed since the user last wrote", b.Failures)
	if code != "" {
		failed += fmt.Sprintf(", the last with WhatsApp error %s", code)
		if b.Meaning != "" {
			failed += " (" + b.Meaning + ")"
		}
	}
	if held {
		b.Why = failed + ": goodbyes went " + schedule + "; no other goodbye goes until the user writes."
	} else {
		b.Why = failed + ": the next goodbye waits until " + until.UTC().Format("2006-01-02 15:04") + " UTC (goodbyes go " + schedule + ", then none until the user writes)."
	}
	return b
}

// days says waits in days: "7, 14, 28 days".
func days(waits []time.Duration) string {
	out := make([]string, len(waits))
	for i, w := range waits {
		out[i] = strconv.Itoa(int(w / (24 * time.Hour)))
	}
	return strings.Join(out, ", ") + " days"
}
