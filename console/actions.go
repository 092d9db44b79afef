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

// action is one of the console's actions, a row of the table actions:
// its name (in its URL, /actions/<name>/preview and /confirm, and its
// audit rows) and its change, made from the form. The preview, the
// confirmation, the operator's check, the CSRF token, the reason, the
// transaction, its timeout and the audit row are the same for every row
// (act, run).
type action struct {
	name string
	// change reads the form into res.Filter (as the audit row records
	// it), or refuses it (a badRequest, a repair.FilterError), and returns
	// the change to make in the action's transaction.
	change func(ctx context.Context, s *server, u user, f actionForm, res *ActionResult) (change, error)
}

// change is what an action does in its transaction: do makes the change
// (dryRun: a preview, whose transaction is rolled back anyway) and says
// how many messages it changes; permanent, when set, counts the
// permanent failures among them, which a confirmation must acknowledge.
type change struct {
	do        func(tx pgx.Tx, dryRun bool) (int64, error)
	permanent func(tx pgx.Tx) (int64, error)
}

// actions are the console's actions.
var actions = []action{
	{name: actionRequeue, change: requeueChange},
	{name: actionCancel, change: cancelChange},
	{name: actionOptOut, change: consentChange},
	{name: actionOptIn, change: consentChange},
	{name: actionErase, change: eraseChange},
	{name: actionClearPause, change: clearPauseChange},
}

// actionNamed returns the action of the table named name.
func actionNamed(name string) (action, bool) {
	for _, a := range actions {
		if a.name == name {
			return a, true
		}
	}
	return action{}, false
}

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
	act, ok := actionNamed(r.PathValue("action"))
	step := r.PathValue("step")
	if !ok || (step != stepPreview && step != stepConfirm) {
		s.fail(w, r, http.StatusNotFound, "no such action")
		return
	}
	action := act.name
	res, err := s.run(r.Context(), u, act, step == stepConfirm, r.PostForm)
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
		render(s, w, r, http.StatusOK, "done", res)
		return
	}
	render(s, w, r, http.StatusOK, "preview", res)
}

// actionForm is an action's submitted form, its message ids and its
// failure group read.
type actionForm struct {
	form  map[string][]string
	ids   []string
	group string
}

// field is the form's field name, trimmed ("" when not given).
func (f actionForm) field(name string) string {
	if v := f.form[name]; len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}

// run previews or confirms an action in one transaction: a preview's is
// rolled back, a confirmation's commits the change with its audit row.
func (s *server) run(ctx context.Context, u user, a action, confirm bool, form map[string][]string) (*ActionResult, error) {
	res := &ActionResult{Action: a.name, Confirmed: confirm, Form: map[string]string{}}
	f, err := readActionForm(form, res)
	if err != nil {
		return nil, err
	}
	ch, err := a.change(ctx, s, u, f, res)
	if err != nil {
		return nil, err
	}
	tx, err := s.cfg.Pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a preview's end, or a failure's
	if err := limit(ctx, tx, s.cfg.StatementTimeout); err != nil {
		return nil, err
	}
	if ch.permanent != nil {
		if res.Permanent, err = ch.permanent(tx); err != nil {
			return nil, err
		}
		if res.Permanent > 0 && confirm {
			if f.field(requeuePermanent) != "yes" {
				return nil, errPermanent{res.Permanent}
			}
			res.Filter["requeue_permanent"] = true
		}
	}
	if res.Messages, err = ch.do(tx, !confirm); err != nil {
		return nil, err
	}
	if !confirm {
		return res, nil
	}
	return res, audited(ctx, tx, u, res)
}

// audited writes a confirmation's audit row and commits its transaction.
func audited(ctx context.Context, tx pgx.Tx, u user, res *ActionResult) error {
	filter, err := json.Marshal(res.Filter)
	if err != nil {
		return err
	}
	// The filter is JSON text: as []byte, the binary's exec-mode pool would
	// send it as bytea, which the jsonb column rejects (22P02).
	row, err := auditInsertQuery.One(ctx, tx, auditInsertArgs{
		Actor: u.Name, Action: res.Action, Filter: string(filter), Messages: res.Messages, Reason: res.Reason,
	})
	if err != nil {
		return err
	}
	res.AuditID = row.ID
	return tx.Commit(ctx)
}

// readActionForm reads the form every action shares: its fields into
// res.Form (for the confirmation's form) and res.Shown (for the
// preview), the reason, the message ids and the failure group.
func readActionForm(form map[string][]string, res *ActionResult) (actionForm, error) {
	f := actionForm{form: form}
	for _, ff := range formFields {
		if v := f.field(ff.name); v != "" {
			res.Form[ff.name] = v
		}
	}
	var err error
	if res.Reason, err = cleanReason(f.field("reason")); err != nil {
		return f, badRequestf("reason: %s", err)
	}
	f.ids = strings.FieldsFunc(f.field("ids"), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	if f.group, err = readGroup(f); err != nil {
		return f, err
	}
	for _, ff := range formFields {
		if v, ok := res.Form[ff.name]; ok && ff.name != "error_group" && ff.name != "error_group_key" {
			res.Shown = append(res.Shown, FormField{ff.label, v})
		}
	}
	if f.group != "" {
		res.Shown = append(res.Shown, FormField{"reason", f.group})
		// The confirmation carries the group by its key, whichever way
		// the preview was asked.
		delete(res.Form, "error_group")
		res.Form["error_group_key"] = errorGroupKey(f.group)
	}
	return f, nil
}

// readGroup reads the failure group the form names: by its key (its
// reason in base64url, which the form carries unaltered), or, from a
// script, by the reason's exact text, untrimmed.
func readGroup(f actionForm) (string, error) {
	group := ""
	if v := f.form["error_group"]; len(v) > 0 {
		group = v[0]
	}
	if key := f.field("error_group_key"); key != "" {
		var ok bool
		if group, ok = groupFromKey(key); !ok {
			return "", badRequestf("the reason's key %q is malformed: reload the queue page and try again", truncate(key, 40))
		}
	}
	_, byText := f.form["error_group"]
	_, byKey := f.form["error_group_key"]
	if (byText || byKey) && group == "" { // not "no filter": that would be every reason
		return "", badRequestf("the reason is empty: requeue messages without an error by their message ids")
	}
	return group, nil
}

// requeueChange is requeue's: repair.Requeue with the form's filter, and
// the permanent failures among its messages counted.
func requeueChange(ctx context.Context, _ *server, _ user, form actionForm, res *ActionResult) (change, error) {
	f := repair.RequeueFilter{Status: form.field("status"), Type: form.field("kind"), IDs: form.ids, ErrorGroup: form.group}
	if err := f.Validate(); err != nil {
		return change{}, err
	}
	res.Filter = map[string]any{"status": f.Status, "type": f.Type, "error_group": f.ErrorGroup, "ids": f.IDs}
	// The permanent ones among them: the same filter, and the error
	// saying what the transport said of a permanent failure.
	p := f
	p.ErrorContains = transport.PermanentMark
	return change{
		do:        func(tx pgx.Tx, dryRun bool) (int64, error) { return repair.Requeue(ctx, tx, f, dryRun) },
		permanent: func(tx pgx.Tx) (int64, error) { return repair.Requeue(ctx, tx, p, true) },
	}, nil
}

// cancelChange is cancel's: repair.Cancel with the form's filter.
func cancelChange(ctx context.Context, _ *server, _ user, form actionForm, res *ActionResult) (change, error) {
	f := repair.CancelFilter{Type: form.field("kind"), IDs: form.ids, UserID: form.field("user_id"), All: form.field("all") == "true"}
	if len(f.IDs) == 0 && f.Type == "" && f.UserID == "" && !f.All {
		return change{}, badRequestf("fill in at least one of kind, user id or message ids")
	}
	if err := f.Validate(); err != nil {
		return change{}, err
	}
	res.Filter = map[string]any{"type": f.Type, "user_id": f.UserID, "ids": f.IDs, "all": f.All}
	return change{do: func(tx pgx.Tx, dryRun bool) (int64, error) { return repair.Cancel(ctx, tx, f, dryRun) }}, nil
}

// formUser is the form's user id, which must be a UUID.
func formUser(form actionForm) (string, error) {
	id := form.field("user_id")
	if !validUUID(id) {
		return "", badRequestf("user id: %q is not a UUID", truncate(id, 40))
	}
	return id, nil
}

// consentChange is opt_out's and opt_in's: the change itself, in the
// action's transaction (a preview's is rolled back). Messages counts the
// pending messages an opt-out cancels.
func consentChange(ctx context.Context, _ *server, u user, form actionForm, res *ActionResult) (change, error) {
	id, err := formUser(form)
	if err != nil {
		return change{}, err
	}
	optOut := res.Action == actionOptOut
	res.Filter = map[string]any{"user_id": id, "source": activity.SourceConsole}
	return change{do: func(tx pgx.Tx, _ bool) (int64, error) {
		pending, err := userPendingQuery.One(ctx, tx, userPendingArgs{UserID: id})
		if err != nil {
			return 0, err
		}
		// Said now, by the operator: superseded only by a wish the
		// user made later still (an instant ahead of the database's
		// clock, as far as the calls allow).
		out, err := activity.Consent(ctx, tx, id, optOut, activity.SourceConsole, activity.ConsentOptions{Actor: u.Name})
		if errors.Is(err, activity.ErrUnknownUser) {
			return 0, badRequestf("no user %s (no profile): nothing to change", id)
		}
		if err != nil {
			return 0, err
		}
		changed := out == activity.ConsentChanged
		res.Filter["changed"] = changed
		if out == activity.ConsentSuperseded {
			res.Filter["superseded"] = true
		}
		if !optOut || !changed {
			return 0, nil
		}
		return pending.Pending, nil
	}}, nil
}

// eraseChange is erase's: package erase works in a savepoint of the
// action's transaction (a preview's is rolled back). Messages counts the
// queue rows it scrubs; Erased says the rest.
func eraseChange(ctx context.Context, _ *server, u user, form actionForm, res *ActionResult) (change, error) {
	id, err := formUser(form)
	if err != nil {
		return change{}, err
	}
	res.Filter = map[string]any{"user_id": id}
	return change{do: func(tx pgx.Tx, _ bool) (int64, error) {
		rep, err := erase.EraseWith(ctx, tx, id, erase.Options{Source: activity.SourceConsole + ":erase", Actor: u.Name})
		if errors.Is(err, erase.ErrUnknownUser) {
			return 0, badRequestf("no user %s: nothing to erase", id)
		}
		if err != nil {
			return 0, err
		}
		res.Erased = &rep
		return rep.Messages, nil
	}}, nil
}

// clearPauseChange is clear_pause's: the transport's active pause ended.
func clearPauseChange(ctx context.Context, s *server, u user, form actionForm, res *ActionResult) (change, error) {
	return change{do: s.clearPause(ctx, u, form.field("transport"), res)}, nil
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
