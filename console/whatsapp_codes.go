package console

import "regexp"

// whatsAppCodes are what WhatsApp's error codes that arrive after a
// message was accepted mean, in an operator's words, from Meta's error
// codes reference
// (https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes).
// A code missing here is shown by its number alone.
var whatsAppCodes = map[string]string{
	"131026": "undeliverable: the number is not on WhatsApp, or its app is too old or has not accepted the terms",
	"131047": "more than 24 hours since the user last wrote: only a template may go",
	"131048": "the number was rate-limited for spam: too many messages were blocked or reported",
	"131049": "Meta's limit on marketing messages to this user: not sent, to keep engagement healthy",
	"131050": "the user stopped marketing messages from this business",
	"131056": "too many messages to the same user in a short time",
	"130472": "the user is in a Meta experiment that withholds marketing messages",
}

var whatsAppCodeIn = regexp.MustCompile(`WhatsApp error ([0-9]+)`)

// WhatsAppMeaning is what the WhatsApp error code named in reason (a
// failure's reason group) means, or "".
func WhatsAppMeaning(reason string) string {
	if m := whatsAppCodeIn.FindStringSubmatch(reason); m != nil {
		return whatsAppCodes[m[1]]
	}
	return ""
}
