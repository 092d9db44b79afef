package console

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
)

// Audit is the audit page: the console's actions, newest first.
type Audit struct {
	Entries []AuditEntry `json:"entries"`
}

// AuditEntry is one action.
type AuditEntry struct {
	ID       int64           `json:"id"`
	At       time.Time       `json:"at"`
	Actor    string          `json:"actor"`
	Action   string          `json:"action"`
	Filter   json.RawMessage `json:"filter"`
	Messages int64           `json:"messages"`
	// Reason is the operator's, empty when none was given.
	Reason string `json:"reason,omitempty"`
}

const maxAuditRows = 500

func (s *server) audit(r *http.Request, src source) (Audit, error) {
	var out Audit
	err := src.read(r.Context(), func(tx pgx.Tx, _ time.Time) error {
		entries, err := auditQuery.All(r.Context(), tx, auditArgs{Limit: maxAuditRows})
		if err != nil {
			return err
		}
		out.Entries = make([]AuditEntry, len(entries))
		for i, e := range entries {
			out.Entries[i] = AuditEntry{ID: e.ID, At: e.At, Actor: e.Actor, Action: e.Action, Filter: e.Filter,
				Messages: e.Messages, Reason: e.Reason}
		}
		return nil
	})
	return out, err
}
