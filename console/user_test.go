package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engagement-scheduler/engagement/console"
	"github.com/engagement-scheduler/engagement/internal/testkit/fixture"
)

// TestUserPageShowsRemindAtOnlyWhenRemindLater: issue 41 found a stale
// remind_at shown for a goodbye_sent user (the bot leaves the column when
// the user moves on). It is a timer of remind_later only.
func TestUserPageShowsRemindAtOnlyWhenRemindLater(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	srv, _ := serveLogged(t, pool)
	now := time.Now().UTC().Truncate(time.Second)
	stale := time.Date(2026, 3, 14, 9, 26, 0, 0, time.UTC)
	goodbye := fixture.User(t, pool, fixture.UserOptions{State: "goodbye_sent", LastActivity: now.Add(-20 * 24 * time.Hour),
		GoodbyeSentAt: fixture.Ptr(now.Add(-time.Hour)), GoodbyeExpiresAt: fixture.Ptr(now.Add(47 * time.Hour)), RemindAt: &stale})
	later := fixture.User(t, pool, fixture.UserOptions{State: "remind_later", LastActivity: now.Add(-20 * 24 * time.Hour), RemindAt: &stale})

	for _, tc := range []struct {
		id   string
		show bool
	}{{goodbye, false}, {later, true}} {
		var u console.User
		resp, body := get(t, srv, "/users?id="+tc.id, viewer, viewerPassword, true)
		decode(t, body, &u)
		if resp.StatusCode != http.StatusOK || u.State == nil {
			t.Fatalf("user %s: %d %s", tc.id, resp.StatusCode, body)
		}
		if shown := u.State.RemindAt != nil; shown != tc.show {
			t.Errorf("%s user: remind_at %v in the JSON, want shown %v", u.State.State, u.State.RemindAt, tc.show)
		}
		_, page := get(t, srv, "/users?id="+tc.id, viewer, viewerPassword, false)
		if shown := strings.Contains(page, "2026-03-14 09:26"); shown != tc.show {
			t.Errorf("%s user: remind at 2026-03-14 09:26 on the page: %v, want %v", u.State.State, shown, tc.show)
		}
	}
}

// searchUsers posts the user page's search form as viewer, asking for
// JSON when asJSON.
func searchUsers(t *testing.T, srv *httptest.Server, q string, asJSON bool) (reply, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/users", strings.NewReader(url.Values{"q": {q}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if asJSON {
		req.Header.Set("Accept", "application/json")
	}
	req.SetBasicAuth(viewer, viewerPassword)
	return do(t, srv, req)
}

// TestUserSearchByPhoneOrJID: issue 41 found a user could be found by UUID
// only, while a support request carries a phone number. The search takes
// a phone number as people write it (Brazil's, with or without the ninth
// digit WhatsApp's older JIDs lack) or a JID; several matches are a list;
// the number reaches no log and no URL.
func TestUserSearchByPhoneOrJID(t *testing.T) {
	t.Parallel()
	pool := binaryPool(t)
	srv, logs := serveLogged(t, pool)
	now := time.Now()
	group := "120363025246125888@g.us"
	a := fixture.User(t, pool, fixture.UserOptions{LastActivity: now, WhatsAppJID: fixture.Ptr("5511912345678@s.whatsapp.net")})
	b := fixture.User(t, pool, fixture.UserOptions{LastActivity: now, WhatsAppJID: fixture.Ptr("551187654321@s.whatsapp.net")})
	c := fixture.User(t, pool, fixture.UserOptions{LastActivity: now, Destination: "group", GroupJID: &group})
	d := fixture.User(t, pool, fixture.UserOptions{LastActivity: now.Add(-time.Hour), Destination: "group", GroupJID: &group})
	fixture.User(t, pool, fixture.UserOptions{LastActivity: now, WhatsAppJID: fixture.Ptr("5521912345678@s.whatsapp.net")}) // another area code

	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"+55 11 91234-5678", []string{a}},
		{"5511912345678", []string{a}},
		{"11 91234-5678", []string{a}},
		{"(11) 91234 5678", []string{a}},
		{"0055 11 91234-5678", []string{a}},
		{"5511912345678@s.whatsapp.net", []string{a}},
		{"5511912345678:12@S.WHATSAPP.NET", []string{a}},
		{"+55 11 98765-4321", []string{b}}, // stored without the ninth digit
		{"+55 11 8765-4321", []string{b}},
		{group, []string{c, d}},
		{"+55 11 90000-0000", nil},
		{"  " + strings.ToUpper(a) + " ", []string{a}},
	} {
		resp, body := searchUsers(t, srv, tc.q, true)
		var u console.User
		decode(t, body, &u)
		var got []string
		switch {
		case u.Found:
			got = []string{u.ID}
		default:
			for _, m := range u.Matches {
				got = append(got, m.ID)
			}
		}
		if resp.StatusCode != http.StatusOK || !slices.Equal(got, tc.want) {
			t.Errorf("search %q: %d, found %v; want %v", tc.q, resp.StatusCode, got, tc.want)
		}
		if len(tc.want) == 1 && (!u.Found || u.State == nil) {
			t.Errorf("search %q: one match, want the user's page: %+v", tc.q, u)
		}
		if len(tc.want) > 1 && (u.Found || u.Matches[0].JID != "" && !strings.HasPrefix(u.Matches[0].JID, "••••")) {
			t.Errorf("search %q: several matches, want a list with masked JIDs: %+v", tc.q, u)
		}
	}
	// The pages: a list links each user; no match says so.
	_, page := searchUsers(t, srv, group, false)
	for _, id := range []string{c, d} {
		if !strings.Contains(page, `href="/users?id=`+id+`"`) {
			t.Errorf("the list of matches does not link %s", id)
		}
	}
	if _, page := searchUsers(t, srv, "+55 11 90000-0000", false); !strings.Contains(page, "No user has this phone number or JID") {
		t.Error("a search without a match does not say so")
	}
	for _, bad := range []string{"1234", "robert'); DROP TABLE users;--", "@g.us", "+55 11 9abc"} {
		if resp, body := searchUsers(t, srv, bad, true); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "phone number") {
			t.Errorf("search %q: %d %s, want 400 saying what a search takes", bad, resp.StatusCode, body)
		}
	}
	// A number in the URL is refused without quoting it back.
	resp, body := get(t, srv, "/users?id="+url.QueryEscape("+55 11 91234-5678"), viewer, viewerPassword, false)
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(body, "91234") || !strings.Contains(body, "search form") {
		t.Errorf("a phone number in the URL: %d, want 400 pointing at the search form without the number", resp.StatusCode)
	}
	// The search form posts: the number never sits in a URL.
	_, page = get(t, srv, "/users", viewer, viewerPassword, false)
	if !strings.Contains(page, `<form method="post" action="/users"`) {
		t.Error("the search form does not post")
	}
	for _, digits := range []string{"91234", "87654321", "120363025246125888", "90000"} {
		if strings.Contains(logs.String(), digits) {
			t.Errorf("the console's log holds a searched number (%s): %s", digits, logs.String())
		}
	}
}
