package console

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// AuditField is one field of an action's filter, as the page lists it.
type AuditField struct{ Key, Value string }

// Fields is the filter as the page lists it: the fields that were given,
// in the order of their names, each value as text (a list of ids joined,
// the first few only).
func (e AuditEntry) Fields() []AuditField {
	var filter map[string]any
	if err := json.Unmarshal(e.Filter, &filter); err != nil {
		return []AuditField{{"filter", string(e.Filter)}}
	}
	var out []AuditField
	for _, k := range slices.Sorted(maps.Keys(filter)) {
		var v string
		switch x := filter[k].(type) {
		case nil:
		case string:
			v = x
		case bool:
			if x {
				v = "yes"
			}
		case []any:
			const shown = 5
			var parts []string
			for i, id := range x {
				if i == shown {
					parts = append(parts, fmt.Sprintf("and %d more", len(x)-shown))
					break
				}
				parts = append(parts, fmt.Sprint(id))
			}
			v = strings.Join(parts, ", ")
		default:
			v = fmt.Sprint(x)
		}
		if v != "" {
			out = append(out, AuditField{k, v})
		}
	}
	return out
}
