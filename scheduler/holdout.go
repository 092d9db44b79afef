package scheduler

import (
	"fmt"
	"math"

	"github.com/engagement-scheduler/engagement/sender"
)

// DefaultHoldoutSalt is the salt of the goodbye's holdout when none is
// given (engagement-daily --holdout-salt): a user is held out when
// engagement_holdout_bucket(salt, user_id) (migration 55) is below the
// holdout percent times 100. Another salt draws another group: the way to
// reset the group on purpose (docs/holdout.md).
const DefaultHoldoutSalt = "engagement-holdout-1"

// Holdout is the goodbye's control group: about Percent % of the users the
// daily job would send a goodbye take the same move (goodbye_sent, their
// 48 hours from the run, logged with holdout = true) and get no message.
// Who is held out depends on Salt and the user id alone, decided in SQL,
// so a re-run, a shard or another database holds out the same users. The
// zero value holds out nobody.
type Holdout struct {
	// Percent is the share held out, 0 to 100, to a hundredth of a percent.
	Percent float64
	// Salt is mixed into the hash (DefaultHoldoutSalt when empty).
	Salt string
}

// Validate reports a percent out of range.
func (h Holdout) Validate() error { return checkPercent("holdout", h.Percent) }

// checkPercent reports a share of users (what's) that is not from 0 to 100.
func checkPercent(what string, p float64) error {
	if math.IsNaN(p) || p < 0 || p > 100 {
		return fmt.Errorf("%s percent must be from 0 to 100, got %v", what, p)
	}
	return nil
}

// BasisPoints is Percent in hundredths of a percent, 0 to 10000: a user
// whose bucket (0 to 9999) is below it is held out.
func (h Holdout) BasisPoints() int {
	return int(math.Round(h.Percent * 100))
}

// salt is the salt the statements are given.
func (h Holdout) salt() string {
	if h.Salt == "" {
		return DefaultHoldoutSalt
	}
	return h.Salt
}

// variantArgs are a kind's copy variants as the goodbye's statement takes
// them: @variant_names and @variant_keys, in name order (empty, not NULL:
// the kind's one text, @message_key). A user's variant is the one at
// engagement_holdout_bucket('variant:' || @message_type, user_id) modulo
// their number, a hash of the user id of its own, apart from the holdout's.
func variantArgs(vs []sender.Variant) (names, keys []string) {
	names, keys = []string{}, []string{}
	for _, v := range vs {
		names, keys = append(names, v.Name), append(keys, v.Key)
	}
	return names, keys
}
