package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/repair"
)

// The console's actions are engagementctl requeue and cancel: the same
// filters, validated and run by package repair. Each is two POSTs: preview
// (the count, in a transaction that is rolled back) and confirm (the change
// and its audit row, in one transaction).
const (
	actionRequeue = "requeue"
	actionCancel  = "cancel"
	stepPreview   = "preview"
	stepConfirm   = "confirm"
)

// ActionResult is what a preview or a confirmation answers.
type ActionResult struct {
	Action string `json:"action"`
	// Confirmed is false for a preview: nothing changed.
	Confirmed bool `json:"confirmed"`
	// Messages is how many messages the action changes (preview: would
	// change, as of now).
	Messages int64 `json:"messages"`
	// Filter is the action's filter, as the audit row records it.
	Filter map[string]any `json:"filter"`
	// AuditID is the audit row a confirmation wrote.
	AuditID int64 `json:"audit_id,omitempty"`
	// Reason is the operator's reason, as the audit row records it;
	// empty for none.
	Reason string `json:"reason,omitempty"`
	// Form holds the submitted fields, for the confirmation form.
	Form map[string]string `json:"-"`
}

// act serves POST /actions/{action}/{step}: operators only, with the form's
// CSRF token.
func (s *server) act(w http.ResponseWriter, r *http.Request) {
	u := requestUser(r)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	if !s.csrf.valid(u.Name, r.PostForm.Get("csrf")) {
		s.fail(w, r, http.StatusForbidden, "missing or invalid CSRF token: reload the page and try again")
		return
	}
	if !u.Operator {
		s.fail(w, r, http.StatusForbidden, "only operators may act; you may look")
		return
	}
	action, step := r.PathValue("action"), r.PathValue("step")
	if (action != actionRequeue && action != actionCancel) || (step != stepPreview && step != stepConfirm) {
		s.fail(w, r, http.StatusNotFound, "no such action")
		return
	}
	res, err := s.run(r.Context(), u, action, step == stepConfirm, r.PostForm)
	if err != nil {
		if errors.Is(err, repair.ErrBadFilter) {
			s.fail(w, r, http.StatusBadRequest, strings.TrimPrefix(err.Error(), repair.ErrBadFilter.Error()+": "))
			return
		}
		s.cfg.Logger.Error().Err(err).Str("action", action).Str("actor", u.Name).Msg("action failed")
		s.fail(w, r, http.StatusInternalServerError, "the action failed; nothing was changed")
		return
	}
	if res.Confirmed {
		for _, c := range s.caches { // what the pages showed has changed
			c.drop()
		}
		s.cfg.Logger.Info().Str("action", action).Str("actor", u.Name).Int64("messages", res.Messages).
			Int64("audit_id", res.AuditID).Msg("action done")
		s.render(w, r, http.StatusOK, "done", res)
		return
	}
	s.render(w, r, http.StatusOK, "preview", res)
}

// run previews or confirms an action in one transaction: a preview's is
// rolled back, a confirmation's commits the change with its audit row.
func (s *server) run(ctx context.Context, u user, action string, confirm bool, form map[string][]string) (*ActionResult, error) {
	field := func(name string) string {
		if v := form[name]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	res := &ActionResult{Action: action, Confirmed: confirm, Form: map[string]string{}}
	for _, name := range []string{"status", "kind", "error_group", "ids", "user_id", "all"} {
		if v := field(name); v != "" {
			res.Form[name] = v
		}
	}
	var err error
	if res.Reason, err = cleanReason(field("reason")); err != nil {
		return nil, fmt.Errorf("%w: reason: %w", repair.ErrBadFilter, err)
	}
	ids := strings.FieldsFunc(field("ids"), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })

	var do func(tx pgx.Tx, dryRun bool) (int64, error)
	switch action {
	case actionRequeue:
		f := repair.RequeueFilter{Status: field("status"), Type: field("kind"), IDs: ids, ErrorGroup: field("error_group")}
		if err := f.Validate(); err != nil {
			return nil, err
		}
		res.Filter = map[string]any{"status": f.Status, "type": f.Type, "error_group": f.ErrorGroup, "ids": f.IDs}
		do = func(tx pgx.Tx, dryRun bool) (int64, error) { return repair.Requeue(ctx, tx, f, dryRun) }
	case actionCancel:
		f := repair.CancelFilter{Type: field("kind"), IDs: ids, UserID: field("user_id"), All: field("all") == "true"}
		if err := f.Validate(); err != nil {
			return nil, err
		}
		res.Filter = map[string]any{"type": f.Type, "user_id": f.UserID, "ids": f.IDs, "all": f.All}
		do = func(tx pgx.Tx, dryRun bool) (int64, error) { return repair.Cancel(ctx, tx, f, dryRun) }
	}

	tx, err := s.cfg.Pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a preview's end, or a failure's
	if err := s.limit(ctx, tx); err != nil {
		return nil, err
	}
	if res.Messages, err = do(tx, !confirm); err != nil {
		return nil, err
	}
	if !confirm {
		return res, nil
	}
	filter, err := json.Marshal(res.Filter)
	if err != nil {
		return nil, err
	}
	// The filter is JSON text: as []byte, the binary's exec-mode pool would
	// send it as bytea, which the jsonb column rejects (22P02).
	if err := tx.QueryRow(ctx, query("audit_insert"), sqlfile.Args{
		"actor": u.Name, "action": action, "filter": string(filter), "messages": res.Messages,
		"reason": res.Reason,
	}).Scan(&res.AuditID); err != nil {
		return nil, err
	}
	return res, tx.Commit(ctx)
}
