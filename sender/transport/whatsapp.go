package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"
)

// defaultWhatsAppBaseURL is the Graph API root used when
// WhatsAppConfig.BaseURL is empty.
const defaultWhatsAppBaseURL = "https://graph.facebook.com/v21.0"

// WhatsAppConfig configures a WhatsApp Cloud API transport.
type WhatsAppConfig struct {
	BaseURL       string                      // default "https://graph.facebook.com/v21.0"; overridable for tests
	PhoneNumberID string                      //
	AccessToken   string                      // sent as "Authorization: Bearer <token>"; never logged or put in errors
	Templates     map[string]WhatsAppTemplate // by message key
	Timeout       time.Duration               // per request; default 10s
	Client        *http.Client                // optional, for tests
	// BusinessAccountID is the WhatsApp Business Account (WABA) id: with
	// it, the transport can read its templates' categories from Meta's
	// Message Templates API (ReadTemplateCategories). Optional.
	BusinessAccountID string
	// Throughput, when positive, is the most messages per second the
	// number is sent at (--whatsapp-throughput), at most ThroughputHigh;
	// Coexistence says it is on the WhatsApp Business app too, 20 mps
	// (--whatsapp-coexistence). See throughput.go.
	Throughput  int
	Coexistence bool
}

// WhatsAppTemplate maps a message key to an approved message template.
type WhatsAppTemplate struct {
	Name     string            `json:"name"`     // approved template name
	Language map[string]string `json:"language"` // our locale -> template language code, e.g. {"pt-BR":"pt_BR","en":"en_US"}; fallback: "pt-BR" entry, else first sorted
	Params   []string          `json:"params"`   // message params, in order, as body parameters {{1}}, {{2}}, ...
	// Category is the operator's declaration of the template's Meta
	// category (MARKETING, UTILITY or AUTHENTICATION, Meta's words), used
	// while Meta has said nothing about it (whatsapp_categories.go).
	// Optional.
	Category string `json:"category,omitempty"`
}

// WhatsApp sends template messages through Meta's WhatsApp Business Cloud
// API. Business-initiated messages outside the 24-hour customer service
// window must be templates, so Delivery.Text is not sent: the template named
// for Delivery.Key is, with Delivery.Params as its body parameters.
//
// The Cloud API reaches individual phone numbers only: a group destination
// is a permanent failure. It has no idempotency key, so Deduplicates is
// false.
type WhatsApp struct {
	base          string // {BaseURL}
	endpoint      string // {BaseURL}/{PhoneNumberID}/messages
	marketing     string // {BaseURL}/{PhoneNumberID}/marketing_messages
	phoneNumberID string
	accountID     string // the WABA id; "" when not given
	token         string
	templates     map[string]WhatsAppTemplate
	http          httpCaller
	throughput    int  // --whatsapp-throughput; 0: none
	coexistence   bool // --whatsapp-coexistence
}

// NewWhatsApp validates cfg and returns a WhatsApp transport. Its errors
// never contain the access token.
func NewWhatsApp(cfg WhatsAppConfig) (*WhatsApp, error) {
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = defaultWhatsAppBaseURL
	}
	base = strings.TrimRight(base, "/")
	if err := validateEndpoint(base); err != nil {
		return nil, errors.New("whatsapp: base " + err.Error())
	}
	phone := strings.TrimSpace(cfg.PhoneNumberID)
	if phone == "" {
		return nil, errors.New("whatsapp: phone number id is empty")
	}
	if !isDigits(phone) {
		return nil, errors.New("whatsapp: phone number id must be digits (the Cloud API's phone number id, not the phone number)")
	}
	account := strings.TrimSpace(cfg.BusinessAccountID)
	if account != "" && !isDigits(account) {
		return nil, errors.New("whatsapp: business account id must be digits (the WhatsApp Business Account id)")
	}
	token := strings.TrimSpace(cfg.AccessToken)
	if token == "" {
		return nil, errors.New("whatsapp: access token is empty")
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, errors.New("whatsapp: access token contains white space or control characters")
	}
	if len(cfg.Templates) == 0 {
		return nil, errors.New("whatsapp: no templates: every message would fail")
	}
	templates := make(map[string]WhatsAppTemplate, len(cfg.Templates))
	for key, t := range cfg.Templates {
		if err := t.validate(); err != nil {
			return nil, fmt.Errorf("whatsapp: template for %q: %w", key, err)
		}
		templates[key] = t
	}
	if cfg.Throughput < 0 || cfg.Throughput > ThroughputHigh {
		return nil, fmt.Errorf("whatsapp: throughput %d messages per second is outside 1 to %d, Meta's highest (0: Meta's level)", cfg.Throughput, ThroughputHigh)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	return &WhatsApp{
		base:          base,
		endpoint:      base + "/" + url.PathEscape(phone) + "/messages",
		marketing:     base + "/" + url.PathEscape(phone) + "/marketing_messages",
		phoneNumberID: phone,
		accountID:     account,
		token:         token,
		templates:     templates,
		http:          httpCaller{name: "whatsapp", client: newClient(cfg.Client), timeout: timeout},
		throughput:    cfg.Throughput,
		coexistence:   cfg.Coexistence,
	}, nil
}

// LoadWhatsAppTemplates reads a JSON file mapping message keys to templates:
//
//	{"engagement.goodbye.self_select": {"name": "goodbye_v1",
//	  "language": {"pt-BR": "pt_BR", "en": "en_US"}, "params": [],
//	  "category": "MARKETING"}}
//
// "category" is optional: Meta's word for the template's category
// (MARKETING, UTILITY, AUTHENTICATION); any other word is an error.
//
// Unknown fields are errors, so a misspelt one is not silently ignored.
func LoadWhatsAppTemplates(path string) (map[string]WhatsAppTemplate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("whatsapp templates: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var templates map[string]WhatsAppTemplate
	if err := dec.Decode(&templates); err != nil {
		return nil, fmt.Errorf("whatsapp templates %s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("whatsapp templates %s: data after the JSON object", path)
	}
	if len(templates) == 0 {
		return nil, fmt.Errorf("whatsapp templates %s: no templates", path)
	}
	for key, t := range templates {
		if err := t.validate(); err != nil {
			return nil, fmt.Errorf("whatsapp templates %s: %q: %w", path, key, err)
		}
	}
	return templates, nil
}

func (t WhatsAppTemplate) validate() error {
	if strings.TrimSpace(t.Name) == "" {
		return errors.New("no name")
	}
	if len(t.Language) == 0 {
		return errors.New("no language")
	}
	for locale, code := range t.Language {
		if strings.TrimSpace(code) == "" {
			return fmt.Errorf("empty language code for locale %q", locale)
		}
	}
	for i, p := range t.Params {
		if strings.TrimSpace(p) == "" {
			return fmt.Errorf("param %d has no name", i+1)
		}
	}
	if t.Category != "" && !MetaCategory(t.Category) {
		return fmt.Errorf("category %q is not one of Meta's: %s", clip(oneLine(t.Category), 40), strings.Join(metaCategories, ", "))
	}
	return nil
}

// languageFor picks the template language code for a locale: the exact
// entry; else one equal up to case and '-'/'_'; else one of the same base
// language ("en-GB" -> "en"); else the "pt-BR" entry; else the first locale
// in sorted order.
func (t WhatsAppTemplate) languageFor(locale string) string {
	if code, ok := t.Language[locale]; ok {
		return code
	}
	locales := make([]string, 0, len(t.Language))
	for l := range t.Language {
		locales = append(locales, l)
	}
	sort.Strings(locales)
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "_", "-")) }
	base := func(s string) string { b, _, _ := strings.Cut(norm(s), "-"); return b }
	if locale != "" {
		for _, l := range locales {
			if norm(l) == norm(locale) {
				return t.Language[l]
			}
		}
		for _, l := range locales {
			if base(l) == base(locale) {
				return t.Language[l]
			}
		}
	}
	if code, ok := t.Language["pt-BR"]; ok {
		return code
	}
	return t.Language[locales[0]]
}

// Name returns "whatsapp".
func (w *WhatsApp) Name() string { return WhatsAppName }

// WhatsAppName is the Cloud API transport's name: its send budget's,
// its pace's and its number health's row.
const WhatsAppName = "whatsapp"

// Deduplicates returns false: the Cloud API has no idempotency key.
func (w *WhatsApp) Deduplicates() bool { return false }

type waRequest struct {
	MessagingProduct string     `json:"messaging_product"`
	RecipientType    string     `json:"recipient_type"`
	To               string     `json:"to"`
	Type             string     `json:"type"`
	Template         waTemplate `json:"template"`
}

type waTemplate struct {
	Name       string        `json:"name"`
	Language   waLanguage    `json:"language"`
	Components []waComponent `json:"components,omitempty"`
}

type waLanguage struct {
	Code string `json:"code"`
}

type waComponent struct {
	Type       string        `json:"type"`
	Parameters []waParameter `json:"parameters"`
}

type waParameter struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type waResponse struct {
	Messages []struct {
		ID string `json:"id"`
	} `json:"messages"`
	Error *struct {
		Message      string `json:"message"`
		Type         string `json:"type"`
		Code         int    `json:"code"`
		ErrorSubcode int    `json:"error_subcode"`
		ErrorData    struct {
			Details string `json:"details"`
		} `json:"error_data"`
	} `json:"error"`
}

// Cloud API error codes worth retrying; the value is the delay to ask for
// when the response has no Retry-After (0: let the caller's backoff decide).
var waTransientCodes = map[int]time.Duration{
	4:      time.Minute,     // application request limit reached
	80007:  time.Minute,     // WhatsApp Business Account rate limit
	130429: 0,               // the number over its throughput: the run slows as a whole (delivery/throughput.go)
	131056: 6 * time.Second, // pair rate limit: one message per 6s to one user
	131000: 0,               // something went wrong
	131016: 0,               // service unavailable
	133004: 0,               // server temporarily unavailable
}

// Cloud API codes of throttling: Meta did not take the message, and it may
// be sent again later.
var waThrottleCodes = map[int]bool{4: true, 80007: true, 130429: true, 131056: true}

// Cloud API codes of a server fault, after which Meta may or may not have
// taken the message.
var waAmbiguousCodes = map[int]bool{131000: true, 131016: true, 133004: true}

// Cloud API error codes that retrying cannot fix.
var waPermanentCodes = map[int]bool{
	100:    true, // invalid parameter
	190:    true, // access token expired or invalid
	131026: true, // message undeliverable
	131047: true, // re-engagement: outside the 24-hour window
	131050: true, // the user stopped marketing messages from this business
	131051: true, // unsupported message type
	132000: true, // template parameter count mismatch
	132001: true, // template does not exist
}

// waPermanent classifies an error response: transient codes and transient
// HTTP statuses (408, 425, 429, 5xx) retry; permanent codes and any other
// 4xx (or 3xx) fail now; anything else retries.
func waPermanent(status, code int) bool {
	if _, ok := waTransientCodes[code]; ok {
		return false
	}
	if transientStatus(status) {
		return false
	}
	if waPermanentCodes[code] {
		return true
	}
	return status >= 300 && status <= 499
}

func (w *WhatsApp) permanent(msg string) *Error {
	return &Error{Err: errors.New(msg + " (permanent)"), Permanent: true, transport: w.Name()}
}

// HasTemplate reports whether key has an approved template, so that the
// binaries can refuse a catalog whose copy variants it lacks.
func (w *WhatsApp) HasTemplate(key string) bool {
	_, ok := w.templates[key]
	return ok
}

// Send sends d's template to d's individual recipient, through the
// Marketing Messages API when its category is MARKETING (endpointFor).
func (w *WhatsApp) Send(ctx context.Context, d Delivery) (Result, error) {
	tmpl, ok := w.templates[d.Key]
	if !ok {
		return Result{}, w.permanent(fmt.Sprintf("no template for message key %q", oneLine(d.Key)))
	}
	to, err := waRecipient(d)
	if err != nil {
		return Result{}, w.permanent(err.Error())
	}
	req := waRequest{
		MessagingProduct: "whatsapp",
		RecipientType:    "individual",
		To:               to,
		Type:             "template",
		Template:         waTemplate{Name: tmpl.Name, Language: waLanguage{Code: tmpl.languageFor(d.Locale)}},
	}
	if len(tmpl.Params) > 0 {
		params, err := w.templateParams(tmpl, d)
		if err != nil {
			return Result{}, err
		}
		req.Template.Components = []waComponent{{Type: "body", Parameters: params}}
	}
	body, err := marshalJSON(req)
	if err != nil {
		return Result{}, w.permanent("cannot encode request")
	}

	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("Accept", "application/json")
	header.Set("User-Agent", userAgent)
	header.Set("Authorization", "Bearer "+w.token)

	red := newRedactor(w.token, w.phoneNumberID, to, d.DestinationJID, d.Text)
	resp, err := w.http.post(ctx, w.endpointFor(tmpl, d), header, body, red)
	if err != nil {
		return Result{}, err
	}
	var parsed waResponse
	jsonErr := json.Unmarshal(resp.body, &parsed)
	if jsonErr == nil && parsed.Error != nil && (parsed.Error.Code != 0 || !successStatus(resp.status)) {
		return Result{}, w.apiError(resp, parsed)
	}
	if !successStatus(resp.status) {
		e := httpError(w.Name(), resp)
		// A server error answered after Meta read the request says
		// nothing about whether it took the message.
		e.MaybeDelivered = resp.status >= 500
		return Result{}, e
	}
	var id string
	if jsonErr == nil && len(parsed.Messages) > 0 {
		id = parsed.Messages[0].ID
	}
	return Result{ProviderMessageID: id}, nil
}

// templateParams fills tmpl's body parameters, in its order, with d's
// params of those names. A param missing or empty is a permanent error:
// Meta would refuse the template without it, on every attempt.
func (w *WhatsApp) templateParams(tmpl WhatsAppTemplate, d Delivery) ([]waParameter, error) {
	params := make([]waParameter, 0, len(tmpl.Params))
	for _, name := range tmpl.Params {
		v := waParamText(d.Params[name])
		if v == "" {
			return nil, w.permanent(fmt.Sprintf("message key %q: param %q is missing or empty", oneLine(d.Key), name))
		}
		params = append(params, waParameter{Type: "text", Text: v})
	}
	return params, nil
}

// apiError classifies a Cloud API error response by its code:
// "error 131047 (permanent), HTTP 400, subcode 2494010".
func (w *WhatsApp) apiError(resp response, parsed waResponse) *Error {
	apiErr := parsed.Error
	perm := waPermanent(resp.status, apiErr.Code)
	e := &Error{Permanent: perm, StatusCode: resp.status, ProviderCode: apiErr.Code, transport: w.Name()}
	// Throttling codes say Meta turned the message away; any other error
	// answered with a server status, or one of the "something went
	// wrong" codes, leaves open whether it was accepted first.
	throttled := waThrottleCodes[apiErr.Code]
	e.MaybeDelivered = !perm && !throttled && (resp.status >= 500 || waAmbiguousCodes[apiErr.Code])
	if !perm {
		e.RetryAfter = parseRetryAfter(resp.header.Get("Retry-After"), time.Now())
		if e.RetryAfter == 0 {
			e.RetryAfter = waTransientCodes[apiErr.Code]
		}
	}
	msg := fmt.Sprintf("error %d (%s), HTTP %d", apiErr.Code, classWord(perm), resp.status)
	if apiErr.ErrorSubcode != 0 {
		msg += fmt.Sprintf(", subcode %d", apiErr.ErrorSubcode)
	}
	if e.RetryAfter > 0 {
		msg += ", retry after " + e.RetryAfter.String()
	}
	// The code and subcode identify the error (Meta documents each); its
	// message and details may quote the recipient or the text, so they are
	// never kept.
	e.Err = errors.New(msg)
	return e
}

// waRecipient is the phone number (digits) to send d to, or why there is
// none. Its errors never quote the JID.
func waRecipient(d Delivery) (string, error) {
	jid := strings.TrimSpace(d.DestinationJID)
	if d.Destination == "group" || strings.HasSuffix(strings.ToLower(jid), "@g.us") {
		return "", errors.New("groups are unsupported by the Cloud API")
	}
	user, server, hasServer := strings.Cut(jid, "@")
	if hasServer {
		switch s := strings.ToLower(server); s {
		case "s.whatsapp.net", "c.us":
		default:
			return "", fmt.Errorf("recipient JID server %q is unsupported by the Cloud API", clip(oneLine(s), 40))
		}
	}
	if i := strings.IndexAny(user, ".:"); i >= 0 { // agent and device suffixes
		user = user[:i]
	}
	user = strings.TrimPrefix(user, "+")
	if !isDigits(user) {
		return "", errors.New("invalid recipient: the JID has no phone number")
	}
	return user, nil
}

// waParamText makes a param value acceptable as template body text, which
// may not contain newlines, tabs or more than four consecutive spaces.
func waParamText(v string) string {
	return oneLine(v)
}
