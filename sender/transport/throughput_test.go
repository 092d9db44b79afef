package transport_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/metafake"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// Issue 57: the Cloud API transport reads its number's throughput level
// from the Phone Number node (Meta, "Throughput",
// https://developers.facebook.com/documentation/business-messaging/whatsapp/throughput:
// 80 mps by default, 1,000 once upgraded, a fixed 20 on a number in use
// with the WhatsApp Business app too). An answer of the wrong type, or
// missing the field, gives no level (0): the caller keeps the safe side.
func TestReadThroughputTakesMetasLevelAndNothingElse(t *testing.T) {
	t.Parallel()
	g := metafake.NewGraph(t)
	w, err := transport.NewWhatsApp(transport.WhatsAppConfig{BaseURL: g.Server.URL, PhoneNumberID: g.PhoneNumberID,
		AccessToken: testToken, Templates: testTemplates()})
	if err != nil {
		t.Fatal(err)
	}
	const number = `"id":"106540352242922","display_phone_number":"+55 11 99999-0000"`
	for _, c := range []struct {
		name, answer string
		ceiling      int
		problems     bool
	}{
		{"HIGH", `{` + number + `,"throughput":{"level":"HIGH"},"is_on_biz_app":false}`, 1000, false},
		{"STANDARD", `{` + number + `,"throughput":{"level":"STANDARD"}}`, 80, false},
		{"on the Business app", `{` + number + `,"throughput":{"level":"STANDARD"},"is_on_biz_app":true,"platform_type":"CLOUD_API"}`, 20, false},
		{"on the Business app, no level", `{` + number + `,"is_on_biz_app":true}`, 20, true},
		{"NOT_APPLICABLE", `{` + number + `,"throughput":{"level":"NOT_APPLICABLE"}}`, 0, true},
		{"level missing", `{` + number + `}`, 0, true},
		{"level null", `{` + number + `,"throughput":null}`, 0, true},
		{"level a number", `{` + number + `,"throughput":{"level":1000}}`, 0, true},
		{"throughput a string", `{` + number + `,"throughput":"HIGH"}`, 0, true},
		{"level lower case", `{` + number + `,"throughput":{"level":"high"}}`, 0, true},
		{"is_on_biz_app a string", `{` + number + `,"throughput":{"level":"HIGH"},"is_on_biz_app":"false"}`, 1000, true},
	} {
		g.SetNumber(c.answer)
		got, err := w.ReadThroughput(context.Background())
		if err != nil || got.Ceiling() != c.ceiling || (len(got.Problems) > 0) != c.problems {
			t.Errorf("%s: %+v (ceiling %d), %v; want ceiling %d, problems %v", c.name, got, got.Ceiling(), err, c.ceiling, c.problems)
		}
	}
	for name, answer := range map[string]func(){
		"not JSON":   func() { g.SetNumber(`<html>`) },
		"a 500":      func() { g.Answer(http.StatusInternalServerError, `{"throughput":{"level":"HIGH"}}`, 0) },
		"slower 5 s": func() { g.Answer(http.StatusOK, `{"throughput":{"level":"HIGH"}}`, 6*time.Second) },
	} {
		answer()
		if got, err := w.ReadThroughput(context.Background()); err == nil {
			t.Errorf("%s: %+v, no error; want an error (no answer)", name, got)
		}
	}
}

// --whatsapp-throughput is 1 to 1000 (0: Meta's level), so that a typo
// cannot ask for more than any number has.
func TestWhatsAppThroughputOutOfRangeIsRefused(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, 1001} {
		_, err := transport.NewWhatsApp(transport.WhatsAppConfig{PhoneNumberID: testPhoneID, AccessToken: testToken,
			Templates: testTemplates(), Throughput: n})
		if err == nil {
			t.Errorf("throughput %d: no error", n)
		}
	}
}
