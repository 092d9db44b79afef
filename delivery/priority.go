package delivery

import (
	"fmt"
	"slices"
	"strings"

	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Kinds in order (queue-process --kind-priority): when the send budget
// cannot take every due message, the claim takes the listed message types
// first, in the list's order, then every other type, oldest due first
// within each (claim.sql), and budget_apply.sql gives out the last slots
// in that order. A message queued longer than KindPriorityMaxWait goes
// first whatever its type, so that no type starves: a week of weekly
// reviews waits behind goodbyes for three days at most.

// ParseKindPriority reads a comma-separated list of message types
// ("goodbye,reminder,weekly_review"); blanks around the names are
// ignored. It checks each type is a kind and none comes twice.
func ParseKindPriority(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for name := range strings.SplitSeq(s, ",") {
		out = append(out, strings.TrimSpace(name))
	}
	return out, CheckKindPriority(out)
}

// CheckKindPriority reports the first type of list that is not a message
// kind, or that comes twice.
func CheckKindPriority(list []string) error {
	known := make([]string, 0, len(sm.Kinds()))
	for _, k := range sm.Kinds() {
		known = append(known, string(k.Message))
	}
	for i, name := range list {
		switch {
		case !slices.Contains(known, name):
			return fmt.Errorf("unknown message type %q: use %s", name, strings.Join(known, ", "))
		case slices.Contains(list[:i], name):
			return fmt.Errorf("message type %q is listed twice", name)
		}
	}
	return nil
}

// kindPriority is the claim's @kind_priority: the list, never nil (an
// empty array is "oldest due first").
func (r *run) kindPriority() []string {
	if r.cfg.KindPriority == nil {
		return []string{}
	}
	return r.cfg.KindPriority
}
