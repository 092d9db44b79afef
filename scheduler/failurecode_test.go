package scheduler_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
	"github.com/engagement-scheduler/engagement/sender/transport"
)

// Issue 55, finding 6: the backoff after a failed goodbye reads the
// failure's WhatsApp code from the message's error_message
// (engagement_failure_code, migration 67), in the two forms it is written
// in. The Cloud API transport's own error for a refusal Meta answers with
// 131026 (a real HTTP exchange with a Graph API stand-in) gives its code,
// as does a late failure's text (engagement_receipt's, which
// TestLateFailuresBackOffByCode applies for real); the webhook's HTTP
// failure has none.
func TestTheFailureCodeIsReadFromWhatDeliveryWrites(t *testing.T) {
	t.Parallel()
	graph := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"(#131026) Message undeliverable","type":"OAuthException","code":131026,` +
			`"error_data":{"messaging_product":"whatsapp","details":"Message Undeliverable."},"fbtrace_id":"A1"}}`))
	}))
	t.Cleanup(graph.Close)
	wa, err := transport.NewWhatsApp(transport.WhatsAppConfig{BaseURL: graph.URL, PhoneNumberID: "100", AccessToken: "tok",
		Templates: map[string]transport.WhatsAppTemplate{"engagement.goodbye.self_select": {Name: "goodbye_v1", Language: map[string]string{"pt-BR": "pt_BR"}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, sendErr := wa.Send(context.Background(), transport.Delivery{ID: "m1", Key: "engagement.goodbye.self_select", Locale: "pt-BR",
		Destination: "individual", DestinationJID: "5511912345678@s.whatsapp.net", Attempt: 1})
	var te *transport.Error
	if !errors.As(sendErr, &te) || te.ProviderCode != 131026 {
		t.Fatalf("the Cloud API's refusal: %v, want a transport error with code 131026", sendErr)
	}

	tx := pgtest.NewTx(t)
	for text, want := range map[string]string{
		sendErr.Error(): "131026",
		"failed after acceptance: WhatsApp error 131049": "131049",
		"webhook: HTTP 400 (permanent)":                  "",
	} {
		got := fixture.FailureCode(t, tx, text)
		if (got == nil && want != "") || (got != nil && *got != want) {
			t.Errorf("engagement_failure_code(%q) = %v, want %q", text, got, want)
		}
	}
}
