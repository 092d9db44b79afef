package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
	"github.com/engagement-scheduler/engagement/sender"
	"github.com/engagement-scheduler/engagement/sender/transport"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Routing by the template's latest Meta category (issue 57). At start, a
// run on a transport that routes by category (transport.CategoryRouter:
// whatsapp-cloud) reads the Message Templates API when it was given the
// account (--whatsapp-business-account-id), records what Meta said
// (engagement_template_categories, categories_save.sql), and reads every
// category known (categories_read.sql: the API's and the console's
// template_category_update webhook's, the newest of them by when Meta
// said it). Then each send's category is, in this order:
//
//  1. the latest Meta said for its template and language;
//  2. the templates file's "category" for its key (the operator's
//     declaration: it counts only while Meta has said nothing, so an old
//     file cannot undo a change Meta made);
//  3. its message type's category (statemachine's kinds, else the one the
//     operator declared with engagementctl categories, else marketing), in
//     Meta's word.
//
// The transport sends a MARKETING template to /marketing_messages, any
// other to /messages, and the send ledger records the category
// (start.sql). A MARKETING template to a +1 (US) number is cancelled before
// its request (us_marketing_blocked): Meta does not deliver it.
//
// A lying Message Templates API (not JSON, a 500, no answer in 5 s) changes
// nothing: the run keeps what was known and logs a warning; an entry of
// the wrong shape is skipped, the others recorded.

// routes is what a run routes its sends by; the zero value routes nothing.
type routes struct {
	router   transport.CategoryRouter
	known    map[transport.TemplateRef]string // Meta's latest word
	declared map[string]sm.Category           // message types the operator declared
}

// readRoutes reads the categories at the start of a run (see above).
func (r *run) readRoutes(ctx context.Context) error {
	r.routes = routes{}
	router, ok := r.cfg.Transport.(transport.CategoryRouter)
	if !ok {
		return nil
	}
	read, err := router.ReadTemplateCategories(ctx)
	switch {
	case errors.Is(err, transport.ErrNoBusinessAccount):
	case err != nil:
		r.log.Warn().Str("error", err.Error()).
			Msg("could not read the templates' categories from the Message Templates API; keeping the last known")
	default:
		if err := r.saveCategories(ctx, read); err != nil {
			return err
		}
	}
	rows, err := categoriesReadQuery.All(ctx, r.pool, sqlfile.None{})
	if err != nil {
		return fmt.Errorf("read the templates' categories: %w", err)
	}
	rt := routes{router: router, known: make(map[transport.TemplateRef]string, len(rows)), declared: map[string]sm.Category{}}
	for _, row := range rows {
		rt.known[transport.TemplateRef{Name: row.TemplateName, Language: row.TemplateLanguage}] = row.Category
	}
	types, err := sender.Categories(ctx, r.pool)
	if err != nil {
		return fmt.Errorf("read the message types' categories: %w", err)
	}
	for _, t := range types {
		rt.declared[t.Type] = t.Category
	}
	r.routes = rt
	return nil
}

// saveCategories records what the Message Templates API said.
func (r *run) saveCategories(ctx context.Context, read transport.TemplateCategories) error {
	n := len(read.Templates)
	args := categoriesSaveArgs{AccountID: read.AccountID, Names: make([]string, n), Languages: make([]string, n),
		Categories: make([]string, n), TemplateIDs: make([]string, n)}
	for i, t := range read.Templates {
		args.Names[i], args.Languages[i], args.Categories[i], args.TemplateIDs[i] = t.Name, t.Language, t.Category, t.ID
	}
	if _, err := categoriesSaveQuery.Exec(ctx, r.pool, args); err != nil {
		return fmt.Errorf("record the templates' categories: %w", err)
	}
	ev := r.log.Info()
	if len(read.Problems) > 0 {
		ev = r.log.Warn().Str("problems", strings.Join(read.Problems, "; "))
	}
	ev.Int("templates", len(read.Templates)).Msg("the Message Templates API's categories recorded")
	return nil
}

// route sets d's Meta category (see above) on a transport that routes by
// it, and says why d must not be sent ("" when it may).
func (r routes) route(d *transport.Delivery) string {
	if r.router == nil {
		return ""
	}
	ref, declared, ok := r.router.Template(*d)
	if !ok {
		return "" // no template: the transport fails it
	}
	d.MetaCategory = r.known[ref]
	if d.MetaCategory == "" {
		d.MetaCategory = declared
	}
	if d.MetaCategory == "" {
		d.MetaCategory = strings.ToUpper(string(sender.CategoryOf(d.Type, r.declared)))
	}
	if d.MetaCategory == transport.CategoryMarketing && r.router.MarketingBlocked(*d) {
		return sm.CancelUSMarketingBlocked
	}
	return ""
}
