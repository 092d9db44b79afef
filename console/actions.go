package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/activity"
	"github.com/engagement-scheduler/engagement/delivery"
	"github.com/engagement-scheduler/engagement/erase"
	"github.com/engagement-scheduler/engagement/internal/postgres"
	"github.com/engagement-scheduler/engagement/repair"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// The console's actions are engagementctl requeue and cancel: the same
// filters, validated and run by package repair. Each is two POSTs: preview
// (the count, in a transaction that is rolled back) and confirm (the change
// and its audit row, in one transaction).
const (
	actionRequeue = "requeue"
	actionCancel  = "cancel"
	actionOptOut  = "opt_out" // the user's page: activity.OptOut, from the console, by the operator
	actionOptIn   = "opt_in"
	actionErase   = "erase" // the user's page: package erase, by the operator
	// actionClearPause ends a transport's account pause (the queue page;
	// delivery.ClearPause, as engagementctl pause clear).
	actionClearPause = "clear_pause"
	stepPreview      = "preview"
	stepConfirm      = "confirm"
)

// actions are the console's actions, by the name in their URL.
var actions = map[string]bool{actionRequeue: true, actionCancel: true, actionOptOut: true, actionOptIn: true, actionErase: true,
	actionClearPause: true}

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
	// Permanent is how many of the messages a requeue selects failed
	// permanently (their transport said retrying cannot help). Requeuing
	// any needs the form's requeue_permanent=yes as well: the preview asks
	// for it, a confirmation without it is refused.
	Permanent int64 `json:"permanent"`
	// Reason is the operator's reason, as the audit row records it;
	// empty for none.
	Reason string `json:"reason,omitempty"`
	// Form holds the submitted fields, for the confirmation form.
	Form map[string]string `json:"-"`
	// Shown is the filter as the preview shows it, in the form's terms.
	Shown []FormField `json:"-"`
	// Erased is what an erase changed (preview: would change), table by
	// table.
	Erased *erase.Report `json:"erased,omitempty"`
}

// FormField is one field of an action's filter, as its form labels it.
type FormField struct{ Label, Value string }

// formFields are the actions' form fields, in the order the preview shows
// them, with their labels; a bad filter's message names repair's fields
// by the same labels (fieldLabel).
var formFields = []struct{ name, label string }{
	{"status", "status"}, {"kind", "kind"}, {"error_group", "reason"}, {"error_group_key", "reason"},
	{"ids", "message ids"}, {"user_id", "user id"}, {"all", "all"}, {"transport", "transport"},
}

// fieldLabel names repair's filter fields as the console's forms do.
func fieldLabel(field string) string {
	switch field {
	case "type":
		return "kind"
	case "ids":
		return "message ids"
	case "user_id":
		return "user id"
	case "key":
		return "idempotency key"
	case "reason":
		return "cancel reason"
	}
	return field
}

// requeuePermanent is the checkbox that acknowledges requeuing permanent
// failures.
const requeuePermanent = "requeue_permanent"

// errPermanent refuses a confirmation that would requeue permanent
// failures without the acknowledgement.
type errPermanent struct{ n int64 }

func (e errPermanent) Error() string {
	return fmt.Sprintf("%s of these messages failed permanently: the receiver refused them for good, and sending them again "+
		"will most likely fail again. Tick \"requeue permanent failures anyway\" on the preview to requeue them; nothing was changed.",
		formatInt(e.n))
}

// act serves POST /actions/{action}/{step}: operators only, with the form's
// CSRF token.
func (s *server) act(w http.ResponseWriter, r *http.Request) {
	u := requestUser(r)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	if msg := badText(r.Form); msg != "" {
		s.fail(w, r, http.StatusBadRequest, msg)
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
	if !actions[action] || (step != stepPreview && step != stepConfirm) {
		s.fail(w, r, http.StatusNotFound, "no such action")
		return
	}
	res, err := s.run(r.Context(), u, action, step == stepConfirm, r.PostForm)
	if err != nil {
		var bad *repair.FilterError
		var perm errPermanent
		var badReq badRequest
		switch {
		case errors.As(err, &bad):
			s.fail(w, r, http.StatusBadRequest, bad.In(fieldLabel))
			return
		case errors.As(err, &perm):
			s.fail(w, r, http.StatusBadRequest, perm.Error())
			return
		case errors.As(err, &badReq):
			s.fail(w, r, http.StatusBadRequest, badReq.msg)
			return
		}
		s.cfg.Logger.Error().Err(err).Str("action", action).Str("actor", u.Name).Msg("action failed")
		s.fail(w, r, http.StatusInternalServerError, "the action failed; nothing was changed")
		return
	}
	if res.Confirmed {
		for _, c := range s.caches { // what the pages show has changed: read them again, in the background
			c.invalidate()
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
	for _, ff := range formFields {
		if v := field(ff.name); v != "" {
			res.Form[ff.name] = v
		}
	}
	var err error
	if res.Reason, err = cleanReason(field("reason")); err != nil {
		return nil, badRequestf("reason: %s", err)
	}
	ids := strings.FieldsFunc(field("ids"), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	// A failure group is named by its key (its reason in base64url, which
	// the form carries unaltered), or, from a script, by the reason's
	// exact text, untrimmed.
	group := ""
	if v := form["error_group"]; len(v) > 0 {
		group = v[0]
	}
	if key := field("error_group_key"); key != "" {
		var ok bool
		if group, ok = groupFromKey(key); !ok {
			return nil, badRequestf("the reason's key %q is malformed: reload the queue page and try again", truncate(key, 40))
		}
	}
	_, byText := form["error_group"]
	_, byKey := form["error_group_key"]
	if (byText || byKey) && group == "" { // not "no filter": that would be every reason
		return nil, badRequestf("the reason is empty: requeue messages without an error by their message ids")
	}
	for _, ff := range formFields {
		if v, ok := res.Form[ff.name]; ok && ff.name != "error_group" && ff.name != "error_group_key" {
			res.Shown = append(res.Shown, FormField{ff.label, v})
		}
	}
	if group != "" {
		res.Shown = append(res.Shown, FormField{"reason", group})
		// The confirmation carries the group by its key, whichever way
		// the preview was asked.
		delete(res.Form, "error_group")
		res.Form["error_group_key"] = errorGroupKey(group)
	}

	var do func(tx pgx.Tx, dryRun bool) (int64, error)
	var permanent func(tx pgx.Tx) (int64, error)
	switch action {
	case actionRequeue:
		f := repair.RequeueFilter{Status: field("status"), Type: field("kind"), IDs: ids, ErrorGroup: group}
		if err := f.Validate(); err != nil {
			return nil, err
		}
		res.Filter = map[string]any{"status": f.Status, "type": f.Type, "error_group": f.ErrorGroup, "ids": f.IDs}
		do = func(tx pgx.Tx, dryRun bool) (int64, error) { return repair.Requeue(ctx, tx, f, dryRun) }
		// The permanent ones among them: the same filter, and the error
		// saying what the transport said of a permanent failure.
		p := f
		p.ErrorContains = transport.PermanentMark
		permanent = func(tx pgx.Tx) (int64, error) { return repair.Requeue(ctx, tx, p, true) }
	case actionCancel:
		f := repair.CancelFilter{Type: field("kind"), IDs: ids, UserID: field("user_id"), All: field("all") == "true"}
		if len(f.IDs) == 0 && f.Type == "" && f.UserID == "" && !f.All {
			return nil, badRequestf("fill in at least one of kind, user id or message ids")
		}
		if err := f.Validate(); err != nil {
			return nil, err
		}
		res.Filter = map[string]any{"type": f.Type, "user_id": f.UserID, "ids": f.IDs, "all": f.All}
		do = func(tx pgx.Tx, dryRun bool) (int64, error) { return repair.Cancel(ctx, tx, f, dryRun) }
	case actionOptOut, actionOptIn:
		// The change itself, in the action's transaction: a preview's is
		// rolled back. Messages counts the pending messages an opt-out
		// cancels.
		user := field("user_id")
		if !validUUID(user) {
			return nil, badRequestf("user id: %q is not a UUID", truncate(user, 40))
		}
		res.Filter = map[string]any{"user_id": user, "source": activity.SourceConsole}
		do = func(tx pgx.Tx, _ bool) (int64, error) {
			pending, err := userPendingQuery.One(ctx, tx, userPendingArgs{UserID: user})
			if err != nil {
				return 0, err
			}
			// Said now, by the operator: superseded only by a wish the
			// user made later still (an instant ahead of the database's
			// clock, as far as the calls allow).
			out, err := activity.Consent(ctx, tx, user, action == actionOptOut, activity.SourceConsole, activity.ConsentOptions{Actor: u.Name})
			if errors.Is(err, activity.ErrUnknownUser) {
				return 0, badRequestf("no user %s (no profile): nothing to change", user)
			}
			if err != nil {
				return 0, err
			}
			changed := out == activity.ConsentChanged
			res.Filter["changed"] = changed
			if out == activity.ConsentSuperseded {
				res.Filter["superseded"] = true
			}
			if action == actionOptIn || !changed {
				return 0, nil
			}
			return pending.Pending, nil
		}
	case actionClearPause:
		do = s.clearPause(ctx, u, field("transport"), res)
	case actionErase:
		// Erase works in a savepoint of the action's transaction: a
		// preview's is rolled back. Messages counts the queue rows it
		// scrubs; Erased says the rest.
		user := field("user_id")
		if !validUUID(user) {
			return nil, badRequestf("user id: %q is not a UUID", truncate(user, 40))
		}
		res.Filter = map[string]any{"user_id": user}
		do = func(tx pgx.Tx, _ bool) (int64, error) {
			rep, err := erase.EraseWith(ctx, tx, user, erase.Options{Source: activity.SourceConsole + ":erase", Actor: u.Name})
			if errors.Is(err, erase.ErrUnknownUser) {
				return 0, badRequestf("no user %s: nothing to erase", user)
			}
			if err != nil {
				return 0, err
			}
			res.Erased = &rep
			return rep.Messages, nil
		}
	}

	tx, err := s.cfg.Pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a preview's end, or a failure's
	if err := s.limit(ctx, tx); err != nil {
		return nil, err
	}
	if permanent != nil {
		if res.Permanent, err = permanent(tx); err != nil {
			return nil, err
		}
		if res.Permanent > 0 && confirm {
			if field(requeuePermanent) != "yes" {
				return nil, errPermanent{res.Permanent}
			}
			res.Filter["requeue_permanent"] = true
		}
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
	row, err := auditInsertQuery.One(ctx, tx, auditInsertArgs{
		Actor: u.Name, Action: action, Filter: string(filter), Messages: res.Messages, Reason: res.Reason,
	})
	if err != nil {
		return nil, err
	}
	res.AuditID = row.ID
	return res, tx.Commit(ctx)
}

// clearPause is the clear_pause action's change: transport's active pause
// ended, by the operator, in the action's transaction (a preview's is
// rolled back). res.Filter names the pause's kind; Messages stays 0.
func (s *server) clearPause(ctx context.Context, u user, transportName string, res *ActionResult) func(pgx.Tx, bool) (int64, error) {
	res.Filter = map[string]any{"transport": transportName}
	return func(tx pgx.Tx, _ bool) (int64, error) {
		kind, err := delivery.ClearPause(ctx, tx, transportName, u.Name)
		if err != nil {
			return 0, err
		}
		if kind == "" {
			return 0, badRequestf("%q is not paused: nothing to clear", truncate(transportName, 40))
		}
		res.Filter["kind"] = kind
		return 0, nil
	}
}

// badText says what is wrong with a form that is not text: a field name or
// value in invalid UTF-8 or holding a NUL byte, which PostgreSQL cannot
// take as text. "" when every field is text.
func badText(form map[string][]string) string {
	for name, values := range form {
		for _, v := range append([]string{name}, values...) {
			switch {
			case !utf8.ValidString(v):
				return fmt.Sprintf("the form field %q is not valid UTF-8 text: send the form from the console's page", truncate(name, 40))
			case strings.ContainsRune(v, 0):
				return fmt.Sprintf("the form field %q holds a NUL byte, which no filter can contain", truncate(name, 40))
			}
		}
	}
	return ""
}

// validUUID reports whether s is a UUID, as PostgreSQL reads one.
func validUUID(s string) bool {
	_, ok := postgres.ParseUUID(s)
	return ok
}
