package console

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

// Meta's template_category_update webhook (issue 57):
// https://developers.facebook.com/documentation/business-messaging/whatsapp/webhooks/reference/template_category_update
// value.message_template_id, message_template_name,
// message_template_language, and either previous_category and new_category
// (completed: the category changed) or correct_category, new_category (the
// current one) and category_update_timestamp (impending: it will change).
// Meta, "Route template messages by category"
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/marketing-messages/route-template-messages/):
// update the mapping only on the completed notification, with
// new_category; an impending one is monitoring information, never routed
// on. So a completed one is recorded (engagement_template_categories), in
// the order Meta triggered them (entry.time: an older one changes
// nothing), for the next queue-process run to route by; an impending one
// is logged and changes nothing. A value that does not fit Meta's shape is
// skipped (errUnusableVerdict), as the other account webhooks'.

// metaLanguage is how Meta spells a template language: "pt_BR", "en",
// "es_MX", "zh_CN".
var metaLanguage = regexp.MustCompile(`^[a-z]{2,3}(_[A-Za-z0-9]{2,8})?$`)

// applyTemplateCategory records one template_category_update change; it
// returns 1 when it changed the recorded category, 0 when it was impending
// or older than what is recorded.
func (s *server) applyTemplateCategory(ctx context.Context, entryID, entryTime, value json.RawMessage) (int, error) {
	v, at, err := metaValue(entryTime, value)
	if err != nil {
		return 0, err
	}
	name, _ := metaString(v, "message_template_name")
	language, _ := metaString(v, "message_template_language")
	category, _ := metaString(v, "new_category")
	if !metaTemplateName.MatchString(name) || !metaLanguage.MatchString(language) || !transport.MetaCategory(category) {
		return 0, fmt.Errorf("%w: no template name, language or new_category in Meta's form", errUnusableVerdict)
	}
	log := s.cfg.Logger.Info().Str("field", "template_category_update").Str("template", name).
		Str("language", language).Str("new_category", category)
	if _, impending := v["correct_category"]; impending {
		correct, _ := metaString(v, "correct_category")
		if transport.MetaCategory(correct) {
			log = log.Str("correct_category", correct)
		}
		log.Msg("whatsapp webhook: Meta will change a template's category; information only, the route stays until it is done")
		return 0, nil
	}
	if _, completed := v["previous_category"]; !completed {
		return 0, fmt.Errorf("%w: neither previous_category (completed) nor correct_category (impending)", errUnusableVerdict)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StatementTimeout)
	defer cancel()
	row, err := whatsappTemplateCategoryQuery.One(ctx, s.cfg.Pool, whatsappTemplateCategoryArgs{
		TemplateName: name, TemplateLanguage: language, Category: category,
		TemplateID: metaID(v["message_template_id"]), AccountID: metaID(entryID), At: at})
	if err != nil {
		return 0, fmt.Errorf("record Meta's template_category_update: %w", err)
	}
	if !row.Changed {
		return 0, nil
	}
	log.Msg("whatsapp webhook: a template's category recorded")
	return 1, nil
}

// metaID is an id Meta sends as a number or a string of digits, or nil.
func metaID(raw json.RawMessage) *string {
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		n = json.Number(s)
	}
	if id, err := strconv.ParseUint(string(n), 10, 64); err == nil {
		s := strconv.FormatUint(id, 10)
		return &s
	}
	return nil
}
