// Package console is the operators' web console (engagement-console): the
// engagement funnel, the queue's health, the job runs, the invariants, a
// user's timeline and the coming week's forecast, each an HTML page and the
// same data as JSON (Accept: application/json), and the two safe actions,
// requeue and cancel, with a preview, a confirmation and an audit row.
//
// Everything a page shows is read in one read-only transaction (the
// forecast, a dry run, in one rolled back) with a statement timeout; nothing an operator types reaches SQL but as a
// parameter. The pages are server-rendered with html/template; the only
// script is the console's own (console.js), which draws the charts with the
// embedded uPlot, so the Content-Security-Policy allows no inline script.
package console

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/engagement-scheduler/engagement/pricing"
	sm "github.com/engagement-scheduler/engagement/statemachine"
)

// Defaults of Config.
const (
	// DefaultStatementTimeout bounds every statement a page runs.
	DefaultStatementTimeout = 10 * time.Second
	// Weeks is how many ISO weeks the overview's series cover.
	Weeks = 8
	// ForecastDays is how many coming days the forecast dry-runs.
	ForecastDays = 7
	// DefaultSnapshotTimeout bounds every statement of a snapshot.
	DefaultSnapshotTimeout = 2 * time.Minute
	// DefaultMaxAge is how old a page's snapshot may be.
	DefaultMaxAge = time.Minute
	// ReactivationWindow is how long after a goodbye a user who writes
	// again counts as reactivated by it.
	ReactivationWindow = 30 * 24 * time.Hour
)

// Config configures the console.
type Config struct {
	// Pool is the database. Pages read in read-only transactions (the
	// forecast in one rolled back); actions write the queue and the audit
	// table.
	Pool *pgxpool.Pool
	// Replica, when set, is a read replica of Pool's database (a hot
	// standby: Supabase's read replicas, a streaming replica): the
	// snapshot pages (overview, queue, verify) read from it, and say how
	// far behind it was; the forecast (it dry-runs the daily job's move
	// statements, which a standby refuses), the other pages, the actions
	// and the audit stay on Pool.
	Replica *pgxpool.Pool
	// Auth says who may look and who may act.
	Auth Auth
	// StatementTimeout bounds each statement (DefaultStatementTimeout when 0).
	StatementTimeout time.Duration
	// AsOf is the instant the pages treat as now; the database clock when
	// nil. Tests and demos pass a fixed time.
	AsOf func() time.Time
	// SnapshotTimeout bounds each statement of a snapshot's computation,
	// which reads whole tables in the background
	// (DefaultSnapshotTimeout when 0).
	SnapshotTimeout time.Duration
	// MaxAge is how old the snapshot of the overview, queue, verify and
	// forecast pages may be (DefaultMaxAge when 0; see cache.go).
	MaxAge time.Duration
	// Clock is the wall clock the snapshots' ages, the background
	// refresh and the limits on failed logins go by (time.Now when nil;
	// tests pass their own). It is not the pages' now: that is AsOf.
	Clock func() time.Time
	// CSRFKey signs the forms' tokens; a random key per process when empty
	// (forms rendered before a restart are then refused: reload them).
	CSRFKey []byte
	// Logger receives one line per request that failed.
	Logger zerolog.Logger
	// WhatsApp, when its AppSecret is set, serves Meta's webhook at
	// WhatsAppWebhookPath, outside the console's authentication: Meta
	// signs what it sends (whatsapp.go).
	WhatsApp WhatsAppWebhook
	// Prices are Meta's prices the queue page's spend and the forecast's
	// cost go by (package pricing); the shipped defaults when nil.
	Prices *pricing.Prices
	// Machine is the state machine whose timers the forecast dry-runs,
	// a column each, and whose kinds it costs: the shipped tables
	// (statemachine.Default, the zero value) in engagement-console.
	Machine sm.Machine
}

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// server is the console's handler.
type server struct {
	cfg    Config
	auth   *authenticator
	csrf   csrf
	pages  map[string]*template.Template // by page name, parsed from the table
	mux    *http.ServeMux
	caches map[string]refresher // the snapshot pages', by name
	snaps  snapshots            // those other pages read, typed
	table  []page               // the pages served (pages, but in a test)
	byName map[string]page
	nav    []navLink
	// apiPaths are the API's paths (apiRoute), which openapi.json
	// documents.
	apiPaths []string
}

// Console is the console's HTTP handler.
type Console struct {
	http.Handler
	s *server
}

// Refresh recomputes the snapshot pages' data every half MaxAge until ctx
// ends, so that no request waits for it: engagement-console runs it beside
// the server. It computes every page once at the start, then only the
// pages someone looked at within the last MaxAge (two rounds): an idle
// console puts no load on the database. Failures are logged; the next
// round tries again.
func (c *Console) Refresh(ctx context.Context) {
	tick := time.NewTicker(c.s.cfg.MaxAge / 2)
	defer tick.Stop()
	for {
		c.s.refreshRound(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// refreshRound is one round of Refresh: it recomputes the pages that are
// due (cache.due) and returns their names.
func (s *server) refreshRound(ctx context.Context) []string {
	var done []string
	for _, p := range s.table {
		name := p.name
		c, ok := s.caches[name]
		if !ok {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if !c.due() {
			continue
		}
		done = append(done, name)
		if took, err := c.refreshed(ctx); err != nil {
			s.cfg.Logger.Warn().Err(err).Str("page", name).Msg("refreshing a page's snapshot failed")
		} else {
			s.cfg.Logger.Debug().Str("page", name).Dur("took", took).Msg("page snapshot refreshed")
		}
	}
	return done
}

// New returns the console.
func New(cfg Config) (*Console, error) { return newConsole(cfg, pages, templateFiles) }

// newConsole returns the console serving the pages of table, their
// templates read from files.
func newConsole(cfg Config, table []page, files fs.FS) (*Console, error) {
	if cfg.Pool == nil {
		return nil, errors.New("console: no database pool")
	}
	cfg.StatementTimeout = cmp.Or(cfg.StatementTimeout, DefaultStatementTimeout)
	cfg.MaxAge = cmp.Or(cfg.MaxAge, DefaultMaxAge)
	cfg.SnapshotTimeout = cmp.Or(cfg.SnapshotTimeout, DefaultSnapshotTimeout)
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	tok, err := newCSRF(cfg.CSRFKey)
	if err != nil {
		return nil, err
	}
	auth, err := newAuthenticator(cfg.Auth, cfg.Logger, cfg.Clock, cfg.CSRFKey)
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, auth: auth, csrf: tok, mux: http.NewServeMux(), table: table, byName: map[string]page{},
		caches: map[string]refresher{}}
	if s.pages, err = parsePages(files, table); err != nil {
		return nil, err
	}
	if err := s.routes(); err != nil {
		return nil, err
	}
	return &Console{Handler: s.handler(), s: s}, nil
}

// routes serves the assets, the table's pages, the actions and the API on
// s.mux.
func (s *server) routes() error {
	assets, err := fs.Sub(assetFiles, "assets")
	if err != nil {
		return err
	}
	s.mux.Handle("GET /assets/", http.StripPrefix("/assets/", assetServer(assets, !s.cfg.Auth.Open())))
	s.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/assets/favicon.svg", http.StatusMovedPermanently)
	})
	for _, p := range s.table {
		s.byName[p.name] = p
		if p.nav {
			s.nav = append(s.nav, navLink{Page: p.name, Title: p.title, Href: p.href()})
		}
		if p.route == "" || p.data == nil {
			continue
		}
		if c := p.data.mount(s, p); c != nil {
			s.caches[p.name] = c
		}
	}
	s.mux.HandleFunc("POST /actions/{action}/{step}", s.act)
	s.apiRoute(http.MethodPost, "/api/messages", s.enqueue)
	s.apiRoute(http.MethodGet, "/api/openapi.json", s.openAPI)
	return nil
}

// handler is the console's handler: the health check and Meta's webhook
// outside its authentication, s.mux behind it.
func (s *server) handler() http.Handler {
	// Cross-origin POSTs are refused before the token is even looked at
	// (Sec-Fetch-Site / Origin), the token refuses the rest.
	protect := http.NewCrossOriginProtection()
	protect.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusForbidden, "cross-origin request refused")
	}))
	inner := protect.Handler(s.authenticated(s.mux))

	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", s.healthz)
	if s.cfg.WhatsApp.AppSecret != "" {
		root.HandleFunc(WhatsAppWebhookPath, s.whatsapp)
	}
	root.Handle("/", inner)
	return securityHeaders(root)
}

// apiRoute serves method on the API's path with h, and any other method
// there with 405 as the API's JSON error, Allow naming the method (and
// HEAD beside GET), as openapi.json documents it.
func (s *server) apiRoute(method, path string, h http.HandlerFunc) {
	s.mux.HandleFunc(method+" "+path, h)
	s.apiPaths = append(s.apiPaths, path)
	allow := method
	if method == http.MethodGet {
		allow += ", " + http.MethodHead
	}
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		s.apiFail(w, http.StatusMethodNotAllowed, "", r.Method+" is not allowed on "+path+"; it takes "+allow)
	})
}

// securityHeaders sets what every response carries: no script but the
// console's own, no framing, no referrer, no sniffing.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

type userKey struct{}

func requestUser(r *http.Request) user { u, _ := r.Context().Value(userKey{}).(user); return u }

// authenticated answers 401 to a request without valid credentials and
// passes the rest on with their user.
func (s *server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, device, no := s.auth.identify(r)
		if no != nil {
			if no.code == http.StatusUnauthorized && len(s.auth.Users) > 0 {
				w.Header().Set("WWW-Authenticate", `Basic realm="engagement-console", charset="UTF-8"`)
			}
			if no.retryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(no.retryAfter.Seconds()))))
			}
			// JSON whatever was asked: no page is rendered for a
			// request without a user (nor its CSRF token).
			r.Header.Set("Accept", "application/json")
			s.fail(w, r, no.code, no.msg)
			return
		}
		if device != nil {
			http.SetCookie(w, device)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// healthz answers 200 when the database answers.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := s.cfg.Pool.Ping(ctx); err != nil {
		s.cfg.Logger.Warn().Err(err).Msg("health check: the database does not answer")
		http.Error(w, "database unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// view is what every page template gets: the page's own data, a T, and
// what the layout needs.
type view[T any] struct {
	Page     string
	Title    string
	Nav      []navLink // the navigation bar, from the table of pages
	User     user
	CSRF     string
	Data     T
	Rendered time.Time
	// Computed is when a snapshot page's data was read (zero for a live
	// page), Took how long that took, MaxAge how old it may get.
	Computed     time.Time
	Took, MaxAge string
	// Stale is set when the snapshot is served while a newer one is
	// computed; RefreshFailed is when the last try failed (zero if not).
	Stale         bool
	RefreshFailed time.Time
	// Replica says how far behind the replica the snapshot was read from
	// was ("" when read from the primary).
	Replica string
	// AsOf is the fixed instant the pages treat as now (Config.AsOf),
	// zero when they go by the database's clock.
	AsOf time.Time
}

// badRequest marks an error in what the request asked (a malformed id):
// 400 with the message, not 500.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

func badRequestf(format string, args ...any) error { return badRequest{fmt.Sprintf(format, args...)} }

// wantsJSON reports whether the client asked for JSON (the API's
// clients always get it).
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json") || strings.HasPrefix(r.URL.Path, "/api/")
}

// render renders a page's data, read at the request.
func render[T any](s *server, w http.ResponseWriter, r *http.Request, code int, name string, data T) {
	renderSnapshot(s, w, r, code, name, &snapshot[T]{data: data})
}

// renderSnapshot renders a page's data; a snapshot's time goes in the
// footer.
func renderSnapshot[T any](s *server, w http.ResponseWriter, r *http.Request, code int, name string, snap *snapshot[T]) {
	data := snap.data
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(data)
		return
	}
	u := requestUser(r)
	v := view[T]{Page: name, Title: s.byName[name].title, Nav: s.nav, User: u, CSRF: s.csrf.token(u.Name), Data: data, Rendered: s.cfg.Clock().UTC()}
	if !snap.taken.IsZero() {
		v.Computed, v.Took, v.MaxAge = snap.taken.UTC(), snap.took.Round(time.Millisecond).String(), s.cfg.MaxAge.String()
		v.Stale, v.RefreshFailed, v.Replica = snap.stale, snap.failed, snap.replica.String()
	}
	if s.cfg.AsOf != nil {
		v.AsOf = s.cfg.AsOf().UTC()
	}
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout", v); err != nil {
		s.cfg.Logger.Error().Err(err).Str("page", name).Msg("template failed")
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, neutralizeBidi(buf.String()))
}

// neutralizeBidi replaces every bidirectional control character (U+061C,
// U+200E, U+200F, U+202A–U+202E, U+2066–U+2069: Unicode's Bidi_Control)
// in a rendered page with its visible name, "[U+202E]". The templates hold
// none, so every one comes from data: an error text, a kind, a reason, a
// message id typed into a form. Left in, it reorders the text around it (a
// masked JID "••••0006" reads "6000••••"). A page's JSON keeps the data
// as it is.
func neutralizeBidi(page string) string {
	if !strings.ContainsFunc(page, isBidiControl) {
		return page
	}
	var b strings.Builder
	b.Grow(len(page) + 64)
	for _, r := range page {
		if isBidiControl(r) {
			fmt.Fprintf(&b, "[U+%04X]", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isBidiControl(r rune) bool { return unicode.Is(unicode.Bidi_Control, r) }

// fail answers an error as JSON or as the error page.
func (s *server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	body := struct {
		Error string `json:"error"`
		Code  int    `json:"code"`
	}{msg, code}
	if wantsJSON(r) || s.pages == nil || code == http.StatusUnauthorized {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
		return
	}
	render(s, w, r, code, "error", body)
}

var funcs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"when": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"at": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"day":     func(t time.Time) string { return t.UTC().Format("Mon 2006-01-02") },
	"clock":   func(t time.Time) string { return t.UTC().Format("15:04") },
	"pct":     func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"seconds": func(f float64) string { return formatSeconds(f) },
	"num":     num,
	"usd":     usd,
}

// num formats a count, int64 as the queries give them or int as
// delivery's budget reports do.
func num(n any) (string, error) {
	switch v := n.(type) {
	case int64:
		return formatInt(v), nil
	case int:
		return formatInt(int64(v)), nil
	}
	return "", fmt.Errorf("num: %T is not an integer", n)
}

// assetServer serves the embedded assets' files, cacheable: their names
// change with the binary only, and the layout adds the version. Behind
// authentication they are private (a shared cache keeps none); a folder
// is not found (no listing).
func assetServer(assets fs.FS, authenticated bool) http.Handler {
	files := http.FileServerFS(assets)
	cacheControl := "public, max-age=3600"
	if authenticated {
		cacheControl = "private, max-age=3600"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		if info, err := fs.Stat(assets, name); err != nil || info.IsDir() || !fs.ValidPath(name) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", cacheControl)
		files.ServeHTTP(w, r)
	})
}

func formatSeconds(f float64) string {
	d := time.Duration(f * float64(time.Second))
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%.1f min", d.Minutes())
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	default:
		return fmt.Sprintf("%.1f d", d.Hours()/24)
	}
}

// usd formats US dollars: "US$1,234" from a hundred up, "US$12.50"
// above a cent, "US$0.0068" below (one message's price).
func usd(f float64) string {
	switch {
	case f >= 100:
		return "US$" + formatInt(int64(math.Round(f)))
	case f == 0 || f >= 0.01:
		return fmt.Sprintf("US$%.2f", f)
	}
	return fmt.Sprintf("US$%.4f", f)
}

// formatInt writes n with thin thousands separators: 1 234 567.
func formatInt(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u202f")
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
