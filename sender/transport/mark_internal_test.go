package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// The console recognises a stored permanent failure by PermanentMark: every
// error a transport classifies permanent says it, and no transient one does.
func TestPermanentFailuresCarryTheMark(t *testing.T) {
	t.Parallel()
	check := func(name string, e *Error) {
		t.Helper()
		if got := PermanentMessage(e.Error()); got != e.Permanent {
			t.Errorf("%s: %q: PermanentMessage %v, but Permanent is %v", name, e.Error(), got, e.Permanent)
		}
	}
	for status := 300; status < 600; status++ {
		check(http.StatusText(status), httpError("webhook", response{status: status, header: http.Header{}}))
	}
	w := &WhatsApp{}
	for _, code := range []int{0, 4, 100, 190, 131000, 131026, 131047, 131056, 132001} {
		for _, status := range []int{400, 403, 429, 500, 503} {
			var parsed waResponse
			if err := json.Unmarshal(fmt.Appendf(nil, `{"error":{"code":%d}}`, code), &parsed); err != nil {
				t.Fatal(err)
			}
			check(http.StatusText(status), w.apiError(response{status: status, header: http.Header{}}, parsed))
		}
	}
	check("no template", w.permanent("no template"))
	check("cannot build", &Error{Err: errors.New("cannot build request (permanent)"), Permanent: true})
}
