package main_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/internal/testkit/cmdtest"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
	"github.com/engagement-scheduler/engagement/internal/testkit/pgtest"
)

// Issue 44: WhatsApp refuses a send with 131050 (the user stopped
// marketing messages from this business). The message fails for good
// (retrying cannot help), and the user is opted out, recorded as from
// 131050: their next goodbye, queued later, is never sent, and the
// number's quality rating is spared the next refusal. The fake Cloud API
// answers as Meta does, an error object with the code.
func TestError131050AtSendTimeOptsTheUserOut(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.NewPool(t)
	var requests int
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"(#131050) Unable to deliver the message. This recipient has chosen to stop receiving marketing messages on WhatsApp from your business.","type":"OAuthException","code":131050,"error_data":{"messaging_product":"whatsapp","details":"Unable to deliver the message."},"fbtrace_id":"Az8or2yhqkZfEZ-_4Qn_Bam"}}`))
	}))
	t.Cleanup(api.Close)
	user := fixture.User(t, pool, fixture.UserOptions{LastActivity: time.Now()})
	fixture.Exec(t, pool, `
		INSERT INTO engagement_message_queue (user_id, message_type, message_key, message_params, destination,
		       destination_jid, scheduled_for, idempotency_key)
		VALUES ($1::uuid, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual',
		        '5511900000001@s.whatsapp.net', now() - interval '1 minute', $1::uuid::text || ':w1'),
		       ($1::uuid, 'weekly_review', 'engagement.weekly_review.celebration', '{"count":"2"}', 'individual',
		        '5511900000001@s.whatsapp.net', now() + interval '1 day', $1::uuid::text || ':w2')`, user)
	res := cmdtest.Run(t, binary(t), cloudEnvAt(t, url, api.URL), "--send-interval", "0")
	if res.Code != 0 {
		t.Fatalf("queue-process: exit %d: %s", res.Code, res.Stderr)
	}
	var optedOut bool
	var source string
	if err := pool.QueryRow(context.Background(), `
		SELECT p.reengagement_opt_out, coalesce((SELECT e.source FROM engagement_consent_events e WHERE e.user_id = p.user_id), '')
		  FROM user_profiles p WHERE p.user_id = $1`, user).Scan(&optedOut, &source); err != nil {
		t.Fatal(err)
	}
	if !optedOut || source != "whatsapp:131050" {
		t.Errorf("after a 131050: opted out %v, consent source %q; want true, whatsapp:131050", optedOut, source)
	}
	got := map[string]string{}
	rows, err := pool.Query(context.Background(), `SELECT idempotency_key, status || coalesce(':' || cancel_reason, '') FROM engagement_message_queue WHERE user_id = $1`, user)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		got[k[len(k)-2:]] = v
	}
	if got["w1"] != "failed" || got["w2"] != "cancelled:opted_out" || requests != 1 {
		t.Errorf("messages %v after %d requests; want the refused one failed (not retried), the later one cancelled for the opt-out, one request", got, requests)
	}
}
