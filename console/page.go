package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"net/http"
	"strings"
	"time"
)

// page is one page of the console, everything the console knows about it
// in one declaration (a row of the table pages, in pages.go): its route,
// its title and place in the navigation, where its data comes from, and
// the template functions that draw its charts. Its data type and loader
// are in its own file (queue.go: Queue and (*server).queue), its template
// is templates/<name>.html (executed as "content" inside
// templates/layout.html), its statements are in queries/.
// docs/development.md, "Adding a console page", is the recipe;
// TestEveryPageIsOneDeclaration holds the table, the templates and the
// routes together.
type page struct {
	name, title string
	// route is the pattern that serves it ("GET /queue"); empty for a page
	// the console renders on its own (an error, an action's preview).
	route string
	// nav lists it in the navigation bar, in the table's order.
	nav bool
	// data is where its data comes from, typed: a snapshotOf[T] (read in
	// the background, served from a snapshot) or a liveOf[T] (read at
	// each request). Nil for a page without a route.
	data pageData
	// charts are the template functions the page's template draws its
	// charts (and other page-only helpers) with; a template using one
	// not declared here fails at start.
	charts template.FuncMap
}

// pageData is a page's source of data, whatever its type: it serves the
// page's routes on s, and returns the page's snapshot cache (nil for a
// page read at each request).
type pageData interface {
	mount(s *server, p page) refresher
}

// snapshotOf is a page whose data, a T, is a snapshot (cache.go): read in
// the background with load and served to every request.
type snapshotOf[T any] struct {
	load func(s *server, ctx context.Context, src source) (T, error)
	// primary keeps it on the primary when there is a replica: the
	// forecast dry-runs the daily job, which a standby refuses.
	primary bool
	// served adds to a snapshot what is made when it is served (the
	// overview's health, from the latest runs and the clock).
	served func(s *server, ctx context.Context, data T) (T, error)
	// keep names the field of snapshots its cache is kept in, for the
	// pages that read it (the overview reads the queue's and verify's).
	keep func(*snapshots) **cache[T]
}

// liveOf is a page whose data, a T, load reads at each request.
type liveOf[T any] struct {
	load func(s *server, r *http.Request, src source) (T, error)
	// post, when set, answers a POST to the page's path with the same
	// template (the user page's search: the number stays out of URLs).
	post func(s *server, r *http.Request, src source) (T, error)
}

// snapshots are the snapshot caches other pages read, typed.
type snapshots struct {
	queue  *cache[Queue]
	verify *cache[Verify]
}

func (d snapshotOf[T]) mount(s *server, p page) refresher {
	c := &cache[T]{name: p.name, maxAge: s.cfg.MaxAge, idle: s.cfg.MaxAge, now: s.cfg.Clock, log: s.cfg.Logger,
		load: func(ctx context.Context) (T, *replicaStatus, error) {
			src := s.snapshotSource(d.primary)
			var zero T
			replica, err := src.replicaStatus(ctx)
			if err != nil {
				return zero, nil, err
			}
			data, err := d.load(s, ctx, src)
			return data, replica, err
		}}
	if d.keep != nil {
		*d.keep(&s.snaps) = c
	}
	s.mux.HandleFunc(p.route, func(w http.ResponseWriter, r *http.Request) {
		snap, err := c.get(r.Context(), true)
		if err == nil && d.served != nil {
			served := *snap
			served.data, err = d.served(s, r.Context(), snap.data)
			snap = &served
		}
		if err != nil {
			s.pageFailed(w, r, p.name, err)
			return
		}
		h := w.Header()
		h.Set("X-Computed-At", snap.taken.UTC().Format(time.RFC3339))
		if snap.stale {
			h.Set("X-Refreshing", "true") // a newer snapshot is being computed
		}
		if snap.replica != nil {
			h.Set("X-Replica-Lag", snap.replica.lagHeader())
		}
		renderSnapshot(s, w, r, http.StatusOK, p.name, snap)
	})
	return c
}

func (d liveOf[T]) mount(s *server, p page) refresher {
	s.mux.HandleFunc(p.route, servePage(s, p.name, d.load))
	if d.post != nil {
		s.mux.HandleFunc("POST "+p.href(), servePage(s, p.name, d.post))
	}
	return nil
}

// servePage serves a page read at each request: load computes its data,
// which is rendered as the page's template, or as JSON when the client
// asks for it.
func servePage[T any](s *server, name string, load func(*server, *http.Request, source) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if msg := badText(r.URL.Query()); msg != "" {
			s.fail(w, r, http.StatusBadRequest, msg)
			return
		}
		data, err := load(s, r, s.live())
		if err != nil {
			s.pageFailed(w, r, name, err)
			return
		}
		render(s, w, r, http.StatusOK, name, data)
	}
}

// pageFailed answers a page whose data could not be read: 400 for what
// the request asked (badRequest), else 500, logged.
func (s *server) pageFailed(w http.ResponseWriter, r *http.Request, name string, err error) {
	var bad badRequest
	if errors.As(err, &bad) {
		s.fail(w, r, http.StatusBadRequest, bad.msg)
		return
	}
	s.cfg.Logger.Error().Err(err).Str("page", name).Msg("page failed")
	s.fail(w, r, http.StatusInternalServerError, "the page could not be read from the database; see the console's log")
}

// merged is the functions of maps, together: a page's charts and the
// helpers of a part it shares.
func merged(sets ...template.FuncMap) template.FuncMap {
	out := template.FuncMap{}
	for _, m := range sets {
		maps.Copy(out, m)
	}
	return out
}

// navLink is one link of the navigation bar.
type navLink struct{ Page, Title, Href string }

// href is the path a route serves: "GET /{$}" is "/".
func (p page) href() string {
	_, path, _ := strings.Cut(p.route, " ")
	return strings.TrimSuffix(path, "{$}")
}

// parsePages parses each page's template, from files, with the layout,
// the shared functions and the page's own.
func parsePages(files fs.FS, table []page) (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, p := range table {
		t, err := template.New(p.name).Funcs(funcs).Funcs(p.charts).
			ParseFS(files, "templates/layout.html", "templates/"+p.name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", p.name, err)
		}
		out[p.name] = t
	}
	return out, nil
}
