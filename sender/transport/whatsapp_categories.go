package transport

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Routing by category (issue 57). Meta, "Route template messages by
// category" (updated 2026-09-21):
// https://developers.facebook.com/documentation/business-messaging/whatsapp/marketing-messages/route-template-messages/
// a template whose latest category is MARKETING is sent to
// POST /<PHONE_NUMBER_ID>/marketing_messages (the Marketing Messages API),
// one of any other category to /<PHONE_NUMBER_ID>/messages. The request
// body and the answer are those of a Cloud API template message (Meta,
// "Send Marketing Messages":
// https://developers.facebook.com/documentation/business-messaging/whatsapp/marketing-messages/send-marketing-messages),
// and so are its errors: Send classifies both alike.
//
// The transport keeps no mapping: the caller (delivery) resolves each
// send's latest category, from what Meta said (the Message Templates API,
// ReadTemplateCategories; the template_category_update webhook) else the
// templates file's "category", and hands it over in Delivery.MetaCategory.

// Meta's template categories, in Meta's words.
const (
	CategoryMarketing      = "MARKETING"
	CategoryUtility        = "UTILITY"
	CategoryAuthentication = "AUTHENTICATION"
)

var metaCategories = []string{CategoryMarketing, CategoryUtility, CategoryAuthentication}

// MetaCategory reports whether c is one of Meta's template categories.
func MetaCategory(c string) bool { return slices.Contains(metaCategories, c) }

// TemplateRef names one template in one language, as Meta keys it.
type TemplateRef struct {
	Name     string
	Language string // Meta's language code, e.g. "pt_BR"
}

// TemplateCategory is one template's category as the Message Templates
// API lists it.
type TemplateCategory struct {
	TemplateRef
	ID       string // Meta's template id; "" when the answer had none
	Category string // MARKETING, UTILITY or AUTHENTICATION
}

// TemplateCategories is a read of the Message Templates API: the templates
// it listed in Meta's shape, and what it said wrong (entries skipped).
type TemplateCategories struct {
	AccountID string
	Templates []TemplateCategory
	Problems  []string
}

// ErrNoBusinessAccount says the transport was given no WhatsApp Business
// Account id: it cannot read the Message Templates API.
var ErrNoBusinessAccount = errors.New("whatsapp: no business account id (--whatsapp-business-account-id)")

// CategoryRouter is a transport that routes each template send by the
// template's latest Meta category (the Cloud API).
type CategoryRouter interface {
	// Template is the template d is sent with and the category the
	// templates file declares for it ("" for none); false when d's key
	// has no template.
	Template(d Delivery) (ref TemplateRef, declared string, ok bool)
	// ReadTemplateCategories reads the account's templates' categories
	// from Meta (ErrNoBusinessAccount without an account id).
	ReadTemplateCategories(ctx context.Context) (TemplateCategories, error)
	// MarketingBlocked reports whether Meta refuses a marketing template
	// to d's recipient: a +1 (US) number.
	MarketingBlocked(d Delivery) bool
}

// Template is the template d is sent with and its declared category.
func (w *WhatsApp) Template(d Delivery) (TemplateRef, string, bool) {
	t, ok := w.templates[d.Key]
	if !ok {
		return TemplateRef{}, "", false
	}
	return TemplateRef{Name: t.Name, Language: t.languageFor(d.Locale)}, t.Category, true
}

// endpointFor is where d's request goes: the Marketing Messages API for a
// MARKETING template (d.MetaCategory, else the templates file's), the
// Cloud API's /messages for any other.
func (w *WhatsApp) endpointFor(t WhatsAppTemplate, d Delivery) string {
	if cmp.Or(d.MetaCategory, t.Category) == CategoryMarketing {
		return w.marketing
	}
	return w.endpoint
}

// MarketingBlocked reports whether d's recipient is a +1 number (the
// United States, and the rest of the North American Numbering Plan, which
// a number alone cannot tell apart). Meta stopped delivering marketing
// template messages to US numbers on 2025-04-01 ("Per-user marketing
// template message limits", in Meta's "Send message templates" guide:
// https://developers.facebook.com/documentation/business-messaging/whatsapp/templates/send-message-templates).
func (w *WhatsApp) MarketingBlocked(d Delivery) bool {
	to, err := waRecipient(d)
	return err == nil && strings.HasPrefix(to, "1")
}

// templatesPageLimit bounds the pages of one read: 50 pages of 100.
const templatesPageLimit = 50

// ReadTemplateCategories lists the account's templates with the Message
// Templates API (GET /<WABA_ID>/message_templates?fields=id,name,language,
// category,status, following paging.cursors.after;
// https://developers.facebook.com/docs/graph-api/reference/whats-app-business-account/message_templates/).
// A status other than 200, a body that is not a JSON object with a "data"
// array, or no whole answer within 5 s is an error (nothing is known from
// it); an entry whose name, language or category is missing, of another
// type or not Meta's word is skipped and named in Problems.
func (w *WhatsApp) ReadTemplateCategories(ctx context.Context) (TemplateCategories, error) {
	out := TemplateCategories{AccountID: w.accountID}
	if w.accountID == "" {
		return out, ErrNoBusinessAccount
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	after := ""
	for range templatesPageLimit {
		page, next, err := w.templatesPage(ctx, after)
		if err != nil {
			return TemplateCategories{AccountID: w.accountID}, err
		}
		for i, raw := range page {
			t, problem := decodeTemplateCategory(raw)
			if problem != "" {
				out.Problems = append(out.Problems, fmt.Sprintf("data[%d] %s", i, problem))
				continue
			}
			out.Templates = append(out.Templates, t)
		}
		if next == "" {
			return out, nil
		}
		after = next
	}
	return out, nil
}

// templatesPage reads one page: its entries and the cursor of the next
// ("" for none).
func (w *WhatsApp) templatesPage(ctx context.Context, after string) ([]json.RawMessage, string, error) {
	q := url.Values{"fields": {"id,name,language,category,status"}, "limit": {"100"}}
	if after != "" {
		q.Set("after", after)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		w.base+"/"+url.PathEscape(w.accountID)+"/message_templates?"+q.Encode(), nil)
	if err != nil {
		return nil, "", fmt.Errorf("whatsapp templates: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := w.http.client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("whatsapp templates: %w", scrubURL(err))
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, "", fmt.Errorf("whatsapp templates: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("whatsapp templates: the Graph API answered %d", resp.StatusCode)
	}
	var page struct {
		Data   []json.RawMessage `json:"data"`
		Paging struct {
			Cursors struct {
				After string `json:"after"`
			} `json:"cursors"`
			Next string `json:"next"`
		} `json:"paging"`
	}
	if err := json.Unmarshal(body, &page); err != nil || page.Data == nil {
		return nil, "", errors.New("whatsapp templates: the Graph API's answer is not a JSON object with a data array")
	}
	next := ""
	if page.Paging.Next != "" { // Meta gives "next" only when there is a next page
		next = page.Paging.Cursors.After
	}
	return page.Data, next, nil
}

// decodeTemplateCategory reads one entry of the list, or says what is
// wrong with it (never quoting a value).
func decodeTemplateCategory(raw json.RawMessage) (TemplateCategory, string) {
	var f map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil || f == nil {
		return TemplateCategory{}, "not a JSON object"
	}
	str := func(name string) string {
		var s string
		if json.Unmarshal(f[name], &s) != nil {
			return ""
		}
		return strings.TrimSpace(s)
	}
	t := TemplateCategory{TemplateRef: TemplateRef{Name: str("name"), Language: str("language")},
		ID: str("id"), Category: str("category")}
	switch {
	case t.Name == "" || len(t.Name) > 512:
		return t, "name missing or not a string"
	case t.Language == "" || len(t.Language) > 32:
		return t, "language missing or not a string"
	case !MetaCategory(t.Category):
		return t, "category not one of Meta's"
	}
	if len(t.ID) > 64 || !isDigits(t.ID) {
		t.ID = ""
	}
	return t, ""
}
