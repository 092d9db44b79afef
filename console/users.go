package console

import (
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engagement-scheduler/engagement/internal/postgres"
)

// Finding a user: a support request carries a phone number, not a UUID.
// The user page's search form takes a user id, a phone number or a JID,
// and is a POST: the number never sits in a URL, so no access log, proxy
// log or browser history keeps it, and the console logs no search term.
// A UUID in the URL (/users?id=…, the links between pages) works as before.

// UserMatch is one user a search found.
type UserMatch struct {
	ID             string     `json:"id"`
	State          string     `json:"state"`
	LastActivityAt *time.Time `json:"last_activity_at"`
	// JID is the WhatsApp JID's last four digits, after ••••.
	JID         string `json:"jid"`
	Destination string `json:"destination"`
}

// maxMatches bounds a search's list.
const maxMatches = 50

// searchUser serves POST /users: the form's q, a user id, a phone number
// or a JID. One match is that user's page; several (or none) a list.
func (s *server) searchUser(r *http.Request, src source) (User, error) {
	if err := r.ParseForm(); err != nil {
		return User{}, badRequestf("the form could not be read")
	}
	q := strings.TrimSpace(r.PostForm.Get("q"))
	out := User{Query: q, Searched: true}
	if q == "" {
		return out, nil
	}
	if id, ok := postgres.ParseUUID(q); ok {
		out.ID = id
		return userByID(r.Context(), src, out)
	}
	jids, ok := searchTerms(q)
	if !ok {
		return out, badRequestf("search for a user id (a UUID), a phone number (8 to 15 digits, with or without +, spaces, dashes) or a JID (…@s.whatsapp.net, …@g.us)")
	}
	err := src.read(r.Context(), func(tx pgx.Tx, _ time.Time) error {
		rows, err := userSearchQuery.All(r.Context(), tx, userSearchArgs{Jids: jids, Limit: maxMatches})
		if err != nil {
			return err
		}
		out.Matches = make([]UserMatch, len(rows))
		for i, m := range rows {
			if m.JIDLast4 != "" {
				m.JIDLast4 = "••••" + m.JIDLast4
			}
			out.Matches[i] = UserMatch{ID: m.UserID, State: m.State, LastActivityAt: m.LastActivityAt,
				JID: m.JIDLast4, Destination: m.Destination}
		}
		return nil
	})
	if err != nil || len(out.Matches) != 1 {
		return out, err
	}
	out.ID = out.Matches[0].ID
	return userByID(r.Context(), src, out)
}

// searchTerms reads a phone number or a JID and returns the JIDs a
// profile could hold for it: a person's as <number>@s.whatsapp.net, for
// each form of the number (phoneForms); any other JID (a group's) as
// typed, lowercased. ok is false for anything else.
func searchTerms(q string) (jids []string, ok bool) {
	if user, server, isJID := strings.Cut(strings.ToLower(q), "@"); isJID {
		if user == "" || server == "" || strings.ContainsAny(q, " \t\r\n") {
			return nil, false
		}
		// A person's JID, from a device (user:device@…) or in the old
		// c.us form: the number's forms.
		if number, _, _ := strings.Cut(user, ":"); (server == "s.whatsapp.net" || server == "c.us") && digitsOnly(number) {
			return personJIDs(phoneForms(number)), true
		}
		return []string{user + "@" + server}, true
	}
	var digits strings.Builder
	for _, r := range q {
		switch {
		case r >= '0' && r <= '9':
			digits.WriteRune(r)
		case strings.ContainsRune("+ -().\u00a0", r):
		default:
			return nil, false
		}
	}
	d := digits.String()
	if strings.HasPrefix(q, "00") && len(d) > 12 { // 00 55 …: the international prefix
		d = d[2:]
	}
	if len(d) < 8 || len(d) > 15 {
		return nil, false
	}
	return personJIDs(phoneForms(d)), true
}

// personJIDs are the WhatsApp JIDs of numbers.
func personJIDs(numbers []string) []string {
	jids := make([]string, len(numbers))
	for i, n := range numbers {
		jids[i] = n + "@s.whatsapp.net"
	}
	return jids
}

// phoneForms are the forms a phone number's digits d can take in a
// WhatsApp JID. Brazil's mobile numbers gained a ninth digit (a 9 after the
// two-digit area code) from 2012 on, and WhatsApp kept the JIDs of many
// accounts made before without it: +55 11 91234-5678 may be
// 551112345678@s.whatsapp.net. Both forms are searched, and a Brazilian
// number typed without the country code (11 91234-5678) is searched with
// it. Extra forms can only find more users, which the page lists.
func phoneForms(d string) []string {
	forms := []string{d}
	brazil := func(national string) {
		switch {
		case len(national) == 11 && national[2] == '9': // DD 9XXXX-XXXX
			forms = append(forms, "55"+national, "55"+national[:2]+national[3:])
		case len(national) == 10: // DD XXXX-XXXX, as before the ninth digit
			forms = append(forms, "55"+national, "55"+national[:2]+"9"+national[2:])
		}
	}
	if strings.HasPrefix(d, "55") {
		brazil(d[2:])
	}
	if !strings.HasPrefix(d, "55") || len(d) <= 11 {
		brazil(d)
	}
	// Each form once, d first.
	seen := map[string]bool{}
	out := forms[:0]
	for _, f := range forms {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

func digitsOnly(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
