package console

import (
	"context"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
)

// page is one page of the console, everything the console knows about it
// in one declaration (a row of the table pages, in pages.go beside the
// loaders): its route, its title and
// place in the navigation, where its data comes from, and the template
// functions that draw its charts. Its template is templates/<name>.html
// (executed as "content" inside templates/layout.html), its statements are
// in queries/. docs/development.md, "Adding a console page", is the
// recipe; TestEveryPageIsOneDeclaration holds the table, the templates and
// the routes together.
type page struct {
	name, title string
	// route is the pattern that serves it ("GET /queue"); empty for a page
	// the console renders on its own (an error, an action's preview).
	route string
	// nav lists it in the navigation bar, in the table's order.
	nav bool
	// snapshot computes its data for the snapshot cache (cache.go): read
	// in the background and served to every request. Or, for a page read
	// at each request, load does.
	snapshot func(*server, context.Context) (any, error)
	load     func(*server, *http.Request) (any, error)
	// post, when set, answers a POST to the page's path with the same
	// template (the user page's search: the number stays out of URLs).
	post func(*server, *http.Request) (any, error)
	// served adds to a snapshot what is made when it is served (the
	// overview's health, from the latest runs and the clock).
	served func(*server, context.Context, any) (any, error)
	// charts are the template functions the page's template draws its
	// charts (and other page-only helpers) with; a template using one
	// not declared here fails at start.
	charts template.FuncMap
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
