package transport_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/engagement-scheduler/engagement/sender/transport"
)

const (
	testJID    = "5511987654321@s.whatsapp.net"
	testPhone  = "5511987654321"
	testText   = "Olá Maria! Faz um tempinho que a gente não se fala 👋 <b>&</b>"
	testSecret = "s3cr3t-webhook-key"
)

// delivery is a typical goodbye delivery.
func delivery() transport.Delivery {
	return transport.Delivery{
		ID:             "0b5c4a4e-2f1f-4a39-9c57-6f2f0f6a8c11",
		UserID:         "7c9e6679-7425-40de-944b-e07fc1f90ae7",
		Type:           "goodbye",
		Key:            "engagement.goodbye.self_select",
		Params:         map[string]string{"name": "Maria", "count": "3"},
		Locale:         "pt-BR",
		Text:           testText,
		Destination:    "individual",
		DestinationJID: testJID,
		IdempotencyKey: "7c9e6679-7425-40de-944b-e07fc1f90ae7:goodbye_sent:2026-11-23",
		Attempt:        2,
	}
}

// asError returns err as a *transport.Error, failing the test when it is not.
func asError(t *testing.T, err error) *transport.Error {
	t.Helper()
	if err == nil {
		t.Fatal("got nil error, want a *transport.Error")
	}
	var terr *transport.Error
	if !errors.As(err, &terr) {
		t.Fatalf("got error %T %q, want a *transport.Error", err, err)
	}
	return terr
}

// checkNoLeak fails the test when the error's text contains a sensitive value
// or is not a single line.
func checkNoLeak(t *testing.T, err error, sensitive ...string) {
	t.Helper()
	s := err.Error()
	for _, v := range sensitive {
		if v != "" && strings.Contains(s, v) {
			t.Errorf("error %q contains sensitive value %q", s, v)
		}
	}
	if strings.ContainsAny(s, "\r\n") {
		t.Errorf("error %q is not a single line", s)
	}
}
